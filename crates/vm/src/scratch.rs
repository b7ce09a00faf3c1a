//! The host file behind a guest's NVDIMM (or NVMe namespace): sparse, of the
//! configuration's size, private to one process and removed when dropped. A traced run boots on an empty one; an
//! extraction worker copies each image into its own, never attaching the image itself, so
//! what recovery writes lands here and image files stay untouched.
//!
//! Its blocks are allocated when it is made and whenever it is cleared: QEMU maps the file,
//! and a page the file system cannot back would kill it with SIGBUS, so a full disk is an
//! error here, before QEMU starts, that names the device and the space needed.
//!
//! Files are named `pm-<pid>-<n>.img` in the cache directory. A process killed before it
//! could remove its files (SIGKILL) leaves them behind; whoever creates the next one
//! removes those of processes that no longer run.

use crate::error::VmError;
use persim_trace::disk_space;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The unit compared and copied: the guest's page size, the file systems' block size.
const BLOCK: usize = 4096;
/// Bytes read per step from the image and the scratch file.
const CHUNK: usize = 1 << 20;

pub(crate) struct ScratchPm {
    path: PathBuf,
    file: File,
    size: u64,
}

impl ScratchPm {
    /// A sparse (all-zero) file of `size` bytes in `dir`, removed when dropped.
    pub(crate) fn create(dir: &Path, size: u64) -> Result<ScratchPm, VmError> {
        // Unique per process and per call: traced runs and extraction workers may run
        // concurrently within one process.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir_all(dir)
            .map_err(|e| VmError::io(format!("creating {}", dir.display()), e))?;
        reap(dir, is_alive);
        let path = dir.join(format!("{PREFIX}{}-{n}{SUFFIX}", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| VmError::io(format!("creating {}", path.display()), e))?;
        let scratch = ScratchPm { path, file, size };
        scratch.clear()?;
        Ok(scratch)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Zeroes the file by punching it to a hole, which a guest mapping it sees at once (a
    /// warm tracing guest, its NVDIMM detached, gets a blank PM per test this way), and
    /// allocates its blocks again.
    pub(crate) fn clear(&self) -> Result<(), VmError> {
        use std::os::fd::AsRawFd;
        let context = || format!("clearing {}", self.path.display());
        self.file
            .set_len(self.size)
            .map_err(|e| VmError::io(context(), e))?;
        let len = libc::off_t::try_from(self.size).expect("PM sizes fit a file offset");
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: fallocate on an open file descriptor this value owns.
        if unsafe { libc::fallocate(self.file.as_raw_fd(), mode, 0, len) } == 0 {
            return self.reserve(len);
        }
        // A file system without holes: writing zeros over what is not zero.
        self.fill_from(&mut std::io::repeat(0), Path::new("zeros"))
            .map(drop)
    }

    /// Allocates the file's `len` bytes (they still read as zeros), or says which device is
    /// full. A file system without `fallocate` reserves nothing ahead.
    fn reserve(&self, len: libc::off_t) -> Result<(), VmError> {
        use std::os::fd::AsRawFd;
        // SAFETY: fallocate on an open file descriptor this value owns.
        if unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len) } == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if !disk_space::is_full(&error) {
            return Ok(());
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        // What is allocated so far counts as free: it is this file's, removed with it.
        let free = disk_space::free_space(dir)
            .map_err(|e| VmError::io(format!("reserving {}", self.path.display()), e))?;
        let allocated = std::fs::metadata(&self.path).map_or(0, |m| {
            use std::os::unix::fs::MetadataExt;
            m.blocks() * 512
        });
        Err(VmError::NoSpace {
            device: free.device,
            dir: dir.to_path_buf(),
            needed_mib: disk_space::mib(self.size),
            free_mib: (free.available + allocated) >> 20,
        })
    }

    /// Makes the file's contents equal to the bytes of `image` from `offset` on (a crash
    /// image holds PM, then the block device), writing only the blocks that differ
    /// (consecutive images differ in few blocks). Returns the number of blocks written.
    /// The guest maps the file shared, so it sees the new contents without any copy.
    pub(crate) fn load(&mut self, image: &Path, offset: u64) -> Result<u64, VmError> {
        use std::io::{Seek, SeekFrom};
        let mut source = File::open(image)
            .map_err(|e| VmError::io(format!("opening {}", image.display()), e))?;
        source
            .seek(SeekFrom::Start(offset))
            .map_err(|e| VmError::io(format!("reading {}", image.display()), e))?;
        self.fill_from(&mut source, image)
    }

    /// [`ScratchPm::load`] from any source (`image` names it in errors).
    fn fill_from(&self, source: &mut impl Read, image: &Path) -> Result<u64, VmError> {
        let context = |what: &str, path: &Path| format!("{what} {}", path.display());
        let mut wanted = vec![0u8; CHUNK];
        let mut current = vec![0u8; CHUNK];
        let mut written = 0;
        let mut offset = 0u64;
        while offset < self.size {
            let len = CHUNK.min((self.size - offset) as usize);
            source
                .read_exact(&mut wanted[..len])
                .map_err(|e| VmError::io(context("reading", image), e))?;
            self.file
                .read_exact_at(&mut current[..len], offset)
                .map_err(|e| VmError::io(context("reading", &self.path), e))?;
            // Runs of differing blocks are written with one call each.
            let mut block = 0;
            while block * BLOCK < len {
                let differs = |b: usize| {
                    let range = b * BLOCK..((b + 1) * BLOCK).min(len);
                    wanted[range.clone()] != current[range]
                };
                if !differs(block) {
                    block += 1;
                    continue;
                }
                let start = block;
                while block * BLOCK < len && differs(block) {
                    block += 1;
                }
                let range = start * BLOCK..(block * BLOCK).min(len);
                self.file
                    .write_all_at(&wanted[range.clone()], offset + range.start as u64)
                    .map_err(|e| VmError::io(context("writing", &self.path), e))?;
                written += (block - start) as u64;
            }
            offset += len as u64;
        }
        Ok(written)
    }
}

impl Drop for ScratchPm {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

const PREFIX: &str = "pm-";
const SUFFIX: &str = ".img";
/// Names of scratch files, `<prefix><pid>-<n><suffix>`: the current one, the tracing
/// plugin's links beside a tracing VM's PM file (`persim_vm::TracingVm`), and extraction
/// workers' files from before traced runs and workers shared this type.
const NAMES: [(&str, &str); 5] = [
    (PREFIX, SUFFIX),
    (PREFIX, ".trace"),
    (PREFIX, ".initial"),
    (PREFIX, ".blk-initial"),
    ("extract-", ".pm"),
];

/// The pid in a scratch file's name, or None for any other file of the cache directory.
fn owner(name: &str) -> Option<u32> {
    let (pid, n) = NAMES.iter().find_map(|(prefix, suffix)| {
        name.strip_prefix(prefix)?
            .strip_suffix(suffix)?
            .split_once('-')
    })?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(pid) && digits(n)) {
        return None;
    }
    pid.parse().ok()
}

/// Removes the scratch files in `dir` whose process is not `alive`. Best effort: a file
/// that cannot be removed stays for the next try.
fn reap(dir: &Path, alive: impl Fn(u32) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner) else {
            continue;
        };
        if pid != std::process::id() && !alive(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether a process `pid` exists (possibly another program that got the pid later: its
/// files are then kept, which is the safe side).
fn is_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    // EPERM: it exists, as another user's process.
    found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 3 * CHUNK as u64;

    /// SIZE bytes, or up to the last block given, with those blocks filled.
    fn image(dir: &Path, name: &str, blocks: &[(usize, u8)]) -> PathBuf {
        let end = blocks.iter().map(|(b, _)| (b + 1) * BLOCK).max();
        let mut data = vec![0u8; end.unwrap_or(0).max(SIZE as usize)];
        for &(block, byte) in blocks {
            data[block * BLOCK..(block + 1) * BLOCK].fill(byte);
        }
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap();
        path
    }

    #[test]
    fn loading_writes_only_differing_blocks_and_never_touches_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let mut scratch = ScratchPm::create(dir.path(), SIZE).unwrap();
        let last = SIZE as usize / BLOCK - 1;
        let a = image(
            dir.path(),
            "a.img",
            &[(0, 1), (1, 1), (2, 1), (300, 7), (last, 9)],
        );
        let b = image(dir.path(), "b.img", &[(0, 1), (1, 2), (2, 2), (300, 7)]);
        let (a_bytes, b_bytes) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

        assert_eq!(scratch.load(&a, 0).unwrap(), 5);
        assert_eq!(std::fs::read(scratch.path()).unwrap(), a_bytes);
        // A guest write between images is undone too.
        scratch.file.write_all_at(&[5], 40 * BLOCK as u64).unwrap();
        assert_eq!(scratch.load(&b, 0).unwrap(), 2 + 1 + 1);
        assert_eq!(std::fs::read(scratch.path()).unwrap(), b_bytes);
        assert_eq!(scratch.load(&b, 0).unwrap(), 0);
        assert_eq!(std::fs::read(&a).unwrap(), a_bytes);

        scratch.clear().unwrap();
        assert!(std::fs::read(scratch.path())
            .unwrap()
            .iter()
            .all(|&b| b == 0));
        let path = scratch.path().to_owned();
        drop(scratch);
        assert!(!path.exists());
    }

    #[test]
    fn a_part_of_a_combined_image_is_loaded_from_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut pm = ScratchPm::create(dir.path(), SIZE).unwrap();
        let mut disk = ScratchPm::create(dir.path(), 2 * BLOCK as u64).unwrap();
        let blocks = SIZE as usize / BLOCK;
        // PM with block 3 set, then the disk with its second block set.
        let combined = image(dir.path(), "pm-and-disk.img", &[(3, 4), (blocks + 1, 6)]);
        assert_eq!(pm.load(&combined, 0).unwrap(), 1);
        assert_eq!(disk.load(&combined, SIZE).unwrap(), 1);
        let bytes = std::fs::read(&combined).unwrap();
        assert_eq!(std::fs::read(pm.path()).unwrap(), bytes[..SIZE as usize]);
        assert_eq!(std::fs::read(disk.path()).unwrap(), bytes[SIZE as usize..]);
    }

    #[test]
    fn files_of_dead_processes_are_removed_at_the_next_creation() {
        let dir = tempfile::tempdir().unwrap();
        // No process can have this pid: it is above every pid_max Linux allows (2^22).
        let dead = 0x7fff_fff0;
        assert!(!is_alive(dead) && is_alive(std::process::id()) && is_alive(1));
        let file = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"x").unwrap();
            path
        };
        let stale = [
            file(&format!("pm-{dead}-3.img")),
            file(&format!("pm-{dead}-3.trace")),
            file(&format!("pm-{dead}-3.initial")),
            file(&format!("pm-{dead}-4.blk-initial")),
            file(&format!("extract-{dead}-0.pm")),
        ];
        let running = file(&format!("pm-{}-99.img", std::process::id()));
        let other = [
            file("pm-1-0.img"),
            file(&format!("pm-{dead}-x.img")),
            file(&format!("pm-{dead}-3.img.tmp")),
            file("initramfs-0123.cpio"),
        ];
        let scratch = ScratchPm::create(dir.path(), SIZE).unwrap();
        assert!(stale.iter().all(|p| !p.exists()));
        assert!(running.exists() && other.iter().all(|p| p.exists()));
        assert_eq!(
            owner(&scratch.path().file_name().unwrap().to_string_lossy()),
            Some(std::process::id())
        );
    }

    #[test]
    fn a_full_disk_is_an_error_naming_the_device_and_the_space_not_a_sparse_file() {
        let test = "a_full_disk_is_an_error_naming_the_device_and_the_space";
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("small");
        let Some(_fs) = crate::testing::Tmpfs::mount(test, &dir, "1m") else {
            return;
        };
        let e = ScratchPm::create(&dir, SIZE).err().expect("3 MiB in 1 MiB");
        let message = e.to_string();
        let want = format!(
            "no space left on tmpfs for the scratch PM file in {} (3 MiB needed",
            dir.display()
        );
        assert!(message.contains(&want), "{message}");
        // Nothing is left half-made, and a file that fits is made.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let fits = ScratchPm::create(&dir, SIZE / 4).unwrap();
        fits.clear().unwrap();
    }

    #[test]
    fn a_short_image_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut scratch = ScratchPm::create(dir.path(), SIZE).unwrap();
        let short = dir.path().join("short.img");
        std::fs::write(&short, [1u8; 100]).unwrap();
        let e = scratch.load(&short, 0).unwrap_err().to_string();
        assert!(e.contains("short.img"), "{e}");
    }
}
