//! State extraction: every crash image is attached to a guest without modifying the image
//! file, recovered with the configuration's `recover` command, and dumped with `fs-dump`
//! (or the test's own state command);
//! failures (recovery error, kernel crash, hang) are results. Workers run in parallel, each
//! driving one guest that it reuses for image after image (see docs/design/extraction.md).

mod worker;

use crate::boot::{prepare, Prepared};
use crate::error::VmError;
use crate::machine::Machine;
use crate::shell::shell_quote;
use persim_state::Recovered;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use worker::Worker;

const FS_DUMP: &str = "fs-dump";

/// How each image reaches a guest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExtractMode {
    /// One guest per worker; per image the NVDIMM is detached, its backing file is
    /// overwritten with the image, and it is attached again.
    #[default]
    ReuseGuest,
    /// A fresh boot per image: the reference the reused guest is checked against.
    FreshBoot,
}

/// What prints the recovered state in the guest: `fs-dump` with these arguments, or a
/// command of the test's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpOptions {
    /// A guest command that prints the state (JSON) instead of fs-dump, e.g. a program's
    /// own recovery tool; the fs-dump arguments below are then unused.
    pub command: Option<String>,
    /// The directory dumped: where `recover` mounts the file system.
    pub root: String,
    /// Fields left out of the dump (`--ignore`), e.g. `atime`.
    pub ignore: Vec<String>,
    /// Names left out of the dump (one `--exclude` each), e.g. `lost+found`.
    pub exclude: Vec<String>,
    /// Longest file contents printed (`--max-content`); None prints whole files.
    pub max_content: Option<u64>,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            command: None,
            root: "/mnt".to_owned(),
            ignore: Vec::new(),
            exclude: Vec::new(),
            max_content: None,
        }
    }
}

impl DumpOptions {
    /// The guest shell command that writes the dump to `output`.
    fn command(&self, output: &str) -> String {
        if let Some(command) = &self.command {
            // A group: a list (`a; b`) or a loop prints the state as a whole, and a
            // trailing comment ends at the newline.
            return format!("{{ {command}\n}} >{output}");
        }
        let mut command = FS_DUMP.to_owned();
        if !self.ignore.is_empty() {
            command.push_str(" --ignore ");
            command.push_str(&shell_quote(&self.ignore.join(",")));
        }
        for name in &self.exclude {
            command.push_str(" --exclude ");
            command.push_str(&shell_quote(name));
        }
        if let Some(bytes) = self.max_content {
            command.push_str(&format!(" --max-content {bytes}"));
        }
        command.push_str(" -- ");
        command.push_str(&shell_quote(&self.root));
        command.push_str(" >");
        command.push_str(output);
        command
    }
}

/// What recovering one crash image gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extracted {
    pub state: Recovered,
    /// With `reads` (`ExtractPool::new`): the PM words (offsets of aligned 8-byte words,
    /// ascending, distinct) that recovery and state extraction loaded before writing them
    /// (what they read of the image); None when not traced or unknown (the guest crashed
    /// or hung).
    pub words_read: Option<Vec<u64>>,
    /// What the kernel logged, at every level, while a recovery that succeeded and its
    /// state command ran (a checksum error that did not fail them, e.g.); empty otherwise.
    pub kernel_log: Vec<String>,
}

/// Recovers every image in guests of `machine` as `mode` says and returns its state
/// printed by `dump` or its failure, in the order of `images`; with `reads` also the PM
/// words each recovery read.
/// `finished(i, &state)` is called (on the calling thread) as soon as image `i` has its
/// result, so a caller can keep results of an interrupted run. A tool
/// failure (QEMU cannot start, an unreadable image, a broken guest) stops all workers and
/// is returned as the error.
pub fn extract_states(
    machine: &Machine,
    mode: ExtractMode,
    reads: bool,
    dump: &DumpOptions,
    images: &[PathBuf],
    finished: impl FnMut(usize, &Extracted),
) -> Result<Vec<Extracted>, VmError> {
    if images.is_empty() {
        return Ok(Vec::new());
    }
    ExtractPool::new(machine, mode, reads)?.extract(dump, images, finished)
}

/// Extraction guests kept booted from one call to the next: a campaign recovers the
/// images of test after test without booting again, and the images of concurrent calls
/// share the guests (one job per image). The dump, which differs between tests, is given
/// per call; the machine, the mode and whether recovery's reads are traced are the pool's. Each guest is driven by a
/// thread of the pool's own, which takes image after image from the queue, whichever
/// call it came from.
pub struct ExtractPool {
    jobs: Option<mpsc::Sender<Job>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// PM plus block device: the length of every crash image.
    image_len: u64,
}

/// One image to recover, and where its result goes.
struct Job {
    index: usize,
    image: PathBuf,
    dump: Arc<DumpOptions>,
    /// Set when the call gave up (another image's tool failure): skip the image.
    cancelled: Arc<AtomicBool>,
    results: mpsc::Sender<(usize, Result<Extracted, VmError>)>,
}

impl ExtractPool {
    /// Prepares the kernel and initramfs and starts `machine.jobs` threads; each boots its
    /// guest when its first image comes. With `reads`, recovery's reads are traced.
    pub fn new(machine: &Machine, mode: ExtractMode, reads: bool) -> Result<ExtractPool, VmError> {
        let prepared = Arc::new(prepare(
            &machine.config,
            &machine.artifacts,
            &machine.cache_dir,
        )?);
        let image_len = machine.config.pm_size() + machine.config.blk_size();
        let machine = Arc::new(machine.clone());
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let threads = (0..machine.jobs.max(1))
            .map(|_| {
                let (machine, prepared, queue) = (
                    Arc::clone(&machine),
                    Arc::clone(&prepared),
                    Arc::clone(&queue),
                );
                std::thread::spawn(move || serve(&machine, mode, reads, &prepared, &queue))
            })
            .collect();
        Ok(ExtractPool {
            jobs: Some(jobs),
            threads,
            image_len,
        })
    }

    /// [`extract_states`] with the pool's guests and `dump` as the state.
    pub fn extract(
        &self,
        dump: &DumpOptions,
        images: &[PathBuf],
        mut finished: impl FnMut(usize, &Extracted),
    ) -> Result<Vec<Extracted>, VmError> {
        for image in images {
            check_image(image, self.image_len)?;
        }
        let (results_tx, results_rx) = mpsc::channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        let dump = Arc::new(dump.clone());
        let jobs = self
            .jobs
            .as_ref()
            .expect("the pool's queue lives as long as it");
        for (index, image) in images.iter().enumerate() {
            let job = Job {
                index,
                image: image.clone(),
                dump: Arc::clone(&dump),
                cancelled: Arc::clone(&cancelled),
                results: results_tx.clone(),
            };
            jobs.send(job)
                .expect("the pool's threads live as long as it");
        }
        drop(results_tx);
        let mut results: Vec<Option<Extracted>> = vec![None; images.len()];
        for (index, result) in results_rx.iter().take(images.len()) {
            match result {
                Ok(extracted) => {
                    finished(index, &extracted);
                    results[index] = Some(extracted);
                }
                Err(e) => {
                    cancelled.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every image has a result when no worker failed"))
            .collect())
    }
}

impl Drop for ExtractPool {
    fn drop(&mut self) {
        // Closing the queue ends the threads, and their guests with them.
        drop(self.jobs.take());
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A pool thread: recovers image after image with its worker, until the queue closes. A
/// worker whose guest broke (a tool failure) is replaced for the next image.
fn serve(
    machine: &Arc<Machine>,
    mode: ExtractMode,
    reads: bool,
    prepared: &Prepared,
    queue: &Mutex<mpsc::Receiver<Job>>,
) {
    let mut worker: Option<Worker> = None;
    loop {
        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(job) = job else { return };
        if job.cancelled.load(Ordering::Relaxed) {
            continue;
        }
        let result = match &mut worker {
            Some(worker) => Ok(worker),
            None => {
                Worker::new(Arc::clone(machine), mode, reads, prepared).map(|w| worker.insert(w))
            }
        }
        .and_then(|w| w.extract(&job.image, &job.dump));
        if result.is_err() {
            worker = None;
        }
        // The call may have given up meanwhile: then nobody wants the result.
        let _ = job.results.send((job.index, result));
    }
}

/// Images must be readable files of exactly the configuration's PM size (plus its block
/// device's).
fn check_image(image: &Path, image_len: u64) -> Result<(), VmError> {
    let context = || format!("crash image {}", image.display());
    let meta = std::fs::metadata(image).map_err(|e| VmError::io(context(), e))?;
    if !meta.is_file() || meta.len() != image_len {
        return Err(VmError::io(
            context(),
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "is not a crash image of {image_len} bytes (the VM configuration's \
                     pm_size_mib and nvme_size_mib); extract with the configuration the \
                     trace was recorded with"
                ),
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_command_quotes_every_argument() {
        let dump = DumpOptions {
            command: None,
            root: "/mnt/my dir".to_owned(),
            ignore: vec!["atime".to_owned(), "ctime".to_owned()],
            exclude: vec!["lost+found".to_owned(), "it's".to_owned()],
            max_content: Some(4096),
        };
        assert_eq!(
            dump.command("/tmp/s.json"),
            r"fs-dump --ignore 'atime,ctime' --exclude 'lost+found' --exclude 'it'\''s' --max-content 4096 -- '/mnt/my dir' >/tmp/s.json"
        );
        assert_eq!(
            DumpOptions::default().command("/o"),
            "fs-dump -- '/mnt' >/o"
        );
        let own = DumpOptions {
            command: Some("ringbuf-tool recover /mnt/log".to_owned()),
            ..dump
        };
        assert_eq!(own.command("/o"), "{ ringbuf-tool recover /mnt/log\n} >/o");
    }

    /// A state command that is a list, a loop with a comment after it, prints all of its
    /// output to the state file (before, only the last command of the list went there).
    #[test]
    fn a_state_command_of_several_commands_writes_all_their_output() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state");
        let own = DumpOptions {
            command: Some("for b in 1 2; do printf $b; done; echo 3 # the end".to_owned()),
            ..DumpOptions::default()
        };
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(own.command(file.to_str().unwrap()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "123\n");
    }

    #[test]
    fn images_of_the_wrong_size_are_refused_before_any_boot() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("short.img");
        std::fs::write(&image, [0u8; 4096]).unwrap();
        let e = check_image(&image, 64 << 20).unwrap_err().to_string();
        assert!(
            e.contains("short.img") && e.contains("67108864 bytes"),
            "{e}"
        );
        let e = check_image(&dir.path().join("gone.img"), 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gone.img"), "{e}");
        assert!(check_image(&image, 4096).is_ok());
    }
}
