//! The run directory: every stage's output is a file a person can inspect, so a stage can
//! be re-run alone and an interrupted run resumes. The one owner of these paths:
//!
//! ```text
//! DIR/inputs.json                 what produced each stage (Inputs)
//! DIR/test.toml                   the test as it ran
//! DIR/output.txt                  what the guest printed, per operation
//! DIR/trace.ptrace (+ .initial, …) the recorded trace and the files beside it
//!                                 (persim_trace::Recording: initial images, symbols)
//! DIR/images.json                 failure points and their images (ImagesIndex)
//! DIR/images/                     the image store: <hash>.img, index.json
//! DIR/states/<hash>.json          what recovering each image gave
//! DIR/reads/<hash>.json           `reads`: the PM words recovering an image read
//! DIR/reads/images/               `reads`: the store of fully persisted images
//! DIR/nt-prefixes.json            `reads`: where NT prefixes are explored (auto)
//! DIR/reference/                  `--reference`: the test traced on the reference
//!                                 configuration (trace.ptrace, …) and its checkpoints'
//!                                 images (images/), both removed once recovered;
//!                                 output.txt, what the guest printed there
//! DIR/reference/states.json       their states by checkpoint (ReferenceStates)
//! DIR/report.json, report.txt     the verdicts
//! DIR/faults/                    `persim faults`' results by default (its own layout)
//! DIR/persim.lock                 held by the process writing here (not a result)
//! ```

use crate::cases::TestCase;
use crate::inputs::Inputs;
use crate::stages::NtDecision;
use anyhow::{bail, Context, Result};
use persim_analyze::{ReferenceStates, Report};
use persim_model::CacheMode;
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use persim_trace::Recording;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A run directory (or a campaign's output directory: the same lock keeps two campaigns
/// apart). One made by [`RunDir::create`] holds the directory's lock for as long as it or
/// a clone of it lives.
#[derive(Clone, Debug)]
pub struct RunDir {
    root: PathBuf,
    /// The locked `persim.lock`, only held: the lock goes with the last clone, or with
    /// the process.
    _lock: Option<Arc<File>>,
}

impl RunDir {
    /// The directory's paths, to read them; it is not locked.
    pub fn new(root: impl Into<PathBuf>) -> RunDir {
        RunDir {
            root: root.into(),
            _lock: None,
        }
    }

    /// Creates the directory (and its parents) if needed, checks that files can be
    /// written there, so that an unusable `--out` is found before any work, and locks it,
    /// so that two processes never write one directory: a second fails with the first's
    /// pid and command line.
    pub fn create(root: impl Into<PathBuf>) -> Result<RunDir> {
        let mut dir = RunDir::new(root);
        std::fs::create_dir_all(&dir.root)
            .with_context(|| format!("cannot create {}", dir.root.display()))?;
        let probe = persim_trace::atomic_file::temporary_path(&dir.root.join("probe"))?;
        std::fs::write(&probe, b"")
            .and_then(|()| std::fs::remove_file(&probe))
            .with_context(|| format!("cannot write in {}", dir.root.display()))?;
        dir._lock = Some(Arc::new(dir.take_lock()?));
        Ok(dir)
    }

    /// An advisory lock (`flock`) on `persim.lock`, which the kernel releases when the
    /// process ends however it ends, so no stale lock is ever left to clean up. The file
    /// is never removed: a process locking a new file of that name would not see the lock
    /// on the old one.
    fn take_lock(&self) -> Result<File> {
        let path = self.lock_file();
        // Not truncated on open: until it has the lock, this process must not erase the
        // holder's pid.
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                bail!(
                    "{} is in use by {}: wait until it ends (or end it), or give another --out",
                    self.root.display(),
                    holder(pid.trim())
                );
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(file)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lock of the process writing here; not a result, so neither
    /// [`RunDir::has_results`] nor [`RunDir::remove_all`] knows it.
    pub fn lock_file(&self) -> PathBuf {
        self.root.join("persim.lock")
    }

    pub fn inputs(&self) -> PathBuf {
        self.root.join("inputs.json")
    }

    pub fn test(&self) -> PathBuf {
        self.root.join("test.toml")
    }

    pub fn output(&self) -> PathBuf {
        self.root.join("output.txt")
    }

    pub fn trace(&self) -> PathBuf {
        self.root.join("trace.ptrace")
    }

    /// The recorded trace with the files beside it.
    pub fn recording(&self) -> Recording {
        Recording::new(self.trace())
    }

    pub fn images_index(&self) -> PathBuf {
        self.root.join("images.json")
    }

    pub fn image_store(&self) -> PathBuf {
        self.root.join("images")
    }

    pub fn states(&self) -> PathBuf {
        self.root.join("states")
    }

    /// The recovered state of the image with hash `hash` (hex).
    pub fn state(&self, hash: &str) -> PathBuf {
        self.states().join(format!("{hash}.json"))
    }

    /// The read sets of the `reads` strategy.
    pub fn reads(&self) -> PathBuf {
        self.root.join("reads")
    }

    /// The PM words that recovering the image with hash `hash` (hex) read of it.
    pub fn read_set(&self, hash: &str) -> PathBuf {
        self.reads().join(format!("{hash}.json"))
    }

    /// The store of the fully persisted images whose recoveries `reads` traces.
    pub fn fully_persisted_store(&self) -> PathBuf {
        self.reads().join("images")
    }

    /// Where `--nt-prefixes auto` decided to explore NT prefixes.
    pub fn nt_decision(&self) -> PathBuf {
        self.root.join("nt-prefixes.json")
    }

    /// `--reference`: the reference configuration's run of the test.
    pub fn reference(&self) -> PathBuf {
        self.root.join("reference")
    }

    /// The reference's trace of the test, with the files beside it.
    pub fn reference_recording(&self) -> Recording {
        Recording::new(self.reference().join("trace.ptrace"))
    }

    /// What the guest printed running the test on the reference configuration.
    pub fn reference_output(&self) -> PathBuf {
        self.reference().join("output.txt")
    }

    /// The reference's fully persisted images of its checkpoints, until recovered.
    pub fn reference_images(&self) -> PathBuf {
        self.reference().join("images")
    }

    /// The reference's state at each checkpoint.
    pub fn reference_states(&self) -> PathBuf {
        self.reference().join("states.json")
    }

    /// The reference's states, read back; None when there are none.
    pub fn read_reference_states(&self) -> Result<Option<ReferenceStates>> {
        if !self.reference_states().is_file() {
            return Ok(None);
        }
        read_json(&self.reference_states()).map(Some)
    }

    /// Where `persim faults` puts its results unless told otherwise: a directory of its
    /// own, which no stage reads or removes.
    pub fn faults(&self) -> PathBuf {
        self.root.join("faults")
    }

    pub fn report_json(&self) -> PathBuf {
        self.root.join("report.json")
    }

    pub fn report_text(&self) -> PathBuf {
        self.root.join("report.txt")
    }

    /// What produced the directory's stages; None if it has no `inputs.json`.
    pub fn read_inputs(&self) -> Result<Option<Inputs>> {
        if !self.inputs().exists() {
            return Ok(None);
        }
        read_json(&self.inputs()).map(Some)
    }

    /// Whether any stage has left its output here.
    pub fn has_results(&self) -> bool {
        [
            self.trace(),
            self.images_index(),
            self.image_store(),
            self.states(),
            self.reads(),
            self.reference(),
            self.report_json(),
        ]
        .iter()
        .any(|p| p.exists())
    }

    /// Removes the outputs of the images stage and those after it.
    pub fn remove_images(&self) -> Result<()> {
        remove(&self.images_index())?;
        remove(&self.image_store())?;
        remove(&self.fully_persisted_store())?;
        remove(&self.nt_decision())?;
        self.remove_report()
    }

    /// Removes the states, the read sets (recoveries' results too) and the report.
    pub fn remove_states(&self) -> Result<()> {
        remove(&self.states())?;
        remove(&self.reads())?;
        remove(&self.nt_decision())?;
        self.remove_report()
    }

    /// Removes the reference's run and the report.
    pub fn remove_reference(&self) -> Result<()> {
        remove(&self.reference())?;
        self.remove_report()
    }

    /// Removes every stage's output (for `--force`).
    pub fn remove_all(&self) -> Result<()> {
        for path in
            self.recording()
                .files()
                .into_iter()
                .chain([self.output(), self.test(), self.inputs()])
        {
            remove(&path)?;
        }
        self.remove_images()?;
        self.remove_reference()?;
        self.remove_states()
    }

    fn remove_report(&self) -> Result<()> {
        remove(&self.report_json())?;
        remove(&self.report_text())
    }

    /// Starts this (empty) directory from another run's execution: its trace, test,
    /// inputs and the states of its images (valid for as long as the recovery is the same;
    /// the next run checks that), so that the execution is judged again with other
    /// options without running it again. Files are hard links where possible. The trace
    /// may be of an older build of Persim: the run that reconciles this directory judges
    /// it again if it is still of the same test on the same machine, and says otherwise.
    pub fn adopt_trace_from(&self, source: &RunDir) -> Result<()> {
        if self.has_results() {
            bail!(
                "{} already holds a run: give a new --out to judge {} again",
                self.root.display(),
                source.root.display()
            );
        }
        if source.read_inputs()?.is_none() || !source.trace().is_file() {
            bail!(
                "{} is not a complete run directory of this Persim (it needs trace.ptrace and \
                 inputs.json)",
                source.root.display()
            );
        }
        source.recording().link_to(&self.recording())?;
        for (from, to) in [
            (source.test(), self.test()),
            (source.output(), self.output()),
        ] {
            link_or_copy(&from, &to)?;
        }
        // Marked as adopted, so that a run of a newer build judges the trace again; an
        // older inputs.json lacks the key of the commands, which test.toml gives.
        let mut inputs = source.read_inputs()?.context("checked above")?;
        inputs.adopted_from = Some(source.root.clone());
        if inputs.commands_key.is_empty() {
            inputs.commands_key = Inputs::commands_key(&TestCase::load(&self.test())?);
        }
        write_atomically(&self.inputs(), &serde_json::to_vec_pretty(&inputs)?)?;
        std::fs::create_dir_all(self.states())
            .with_context(|| format!("cannot create {}", self.states().display()))?;
        if let Ok(states) = std::fs::read_dir(source.states()) {
            for state in states.flatten() {
                link_or_copy(&state.path(), &self.states().join(state.file_name()))?;
            }
        }
        // The reference's states, kept if the run's reference is the same (its key).
        if source.reference_states().is_file() {
            std::fs::create_dir_all(self.reference())
                .with_context(|| format!("cannot create {}", self.reference().display()))?;
            link_or_copy(&source.reference_states(), &self.reference_states())?;
        }
        Ok(())
    }

    /// The run's report, read back.
    pub fn read_report(&self) -> Result<Report> {
        read_json(&self.report_json())
            .context("is this a directory of `persim run` (or a test's of `persim suite`)?")
    }

    /// Where `--nt-prefixes auto` decided to explore NT prefixes, if it has.
    pub(crate) fn read_nt_decision(&self) -> Result<Option<NtDecision>> {
        if !self.nt_decision().exists() {
            return Ok(None);
        }
        read_json(&self.nt_decision()).map(Some)
    }

    /// The recovered state of an image, read back.
    pub fn read_state(&self, hash: &str) -> Result<Recovered> {
        read_json(&self.state(hash))
    }

    /// What each image behind the report's states recovered to, by image hash.
    pub fn read_report_states(&self, report: &Report) -> Result<HashMap<String, Recovered>> {
        let images = (report.checkpoints.iter())
            .flat_map(|c| &c.states)
            .flat_map(|s| &s.images);
        let mut states = HashMap::new();
        for hash in images {
            if !states.contains_key(hash) {
                states.insert(hash.clone(), self.read_state(hash)?);
            }
        }
        Ok(states)
    }

    /// The cache mode a run directory was judged with, for the commands that replay its
    /// trace (another mode would show a pending state the run never had); a trace file's
    /// is volatile, the model's default.
    pub fn recorded_cache(path: &Path) -> Result<CacheMode> {
        if !path.is_dir() {
            return Ok(CacheMode::Volatile);
        }
        let inputs = RunDir::new(path).read_inputs()?;
        Ok(inputs.map_or(CacheMode::Volatile, |inputs| inputs.cache))
    }

    /// The trace of a run directory, or `path` itself when it is a trace file (for the
    /// commands that take either).
    pub fn trace_of(path: &Path) -> PathBuf {
        if path.is_dir() {
            RunDir::new(path).trace()
        } else {
            path.to_path_buf()
        }
    }
}

/// The process holding a lock, for a message: `persim (pid 123: persim run …)`.
fn holder(pid: &str) -> String {
    if pid.is_empty() {
        return "another persim (it has not written its pid yet)".to_owned();
    }
    // /proc/PID/cmdline: the arguments, each ended by a NUL.
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(args) if !args.is_empty() => {
            let args: Vec<String> = args
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            format!("another persim (pid {pid}: {})", args.join(" "))
        }
        _ => format!("another persim (pid {pid})"),
    }
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is malformed", path.display()))
}

/// Removes a file or a directory tree; one that is not there is fine.
fn remove(path: &Path) -> Result<()> {
    let removed = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::hard_link(from, to)
        .or_else(|_| std::fs::copy(from, to).map(drop))
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_directory_is_refused_up_front_by_name() {
        let e = RunDir::create("/proc/self").unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot write in /proc/self"),
            "{e:#}"
        );
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(tmp.path().join("a/b")).unwrap();
        let left: Vec<_> = std::fs::read_dir(dir.root())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(left, [dir.lock_file()], "the probe is removed");
    }

    #[test]
    fn a_second_writer_is_refused_with_the_first_ones_pid_until_the_first_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let first = RunDir::create(tmp.path().join("run")).unwrap();
        let e = format!("{:#}", RunDir::create(first.root()).unwrap_err());
        let pid = std::process::id();
        assert!(
            e.contains(&format!("is in use by another persim (pid {pid}: "))
                && e.contains("give another --out"),
            "{e}"
        );
        // Its command line: this test binary's.
        let me = std::env::args().next().unwrap();
        assert!(e.contains(&me), "{e}");

        // A clone holds the lock too; the last one gone releases it.
        let clone = first.clone();
        drop(first);
        assert!(RunDir::create(clone.root()).is_err());
        drop(clone);
        let again = RunDir::create(tmp.path().join("run")).unwrap();
        assert!(!again.has_results(), "the lock file is no result");
        again.remove_all().unwrap();
        assert!(again.lock_file().exists(), "and stays while locked");
        assert!(RunDir::create(again.root()).is_err());
    }
}
