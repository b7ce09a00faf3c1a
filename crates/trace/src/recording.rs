//! A recorded trace and the files a recording keeps beside it, the one owner of their
//! names: `TRACE.initial` (PM at the trace's start: crash images are built on top of it),
//! `TRACE.blk-initial` (the block device's, on a machine with a disk) and `TRACE.symbols`
//! (the code's symbols, [`crate::Symbols`]). Whoever moves, links or removes a trace does
//! it here, so no file of it is left behind or forgotten.

use crate::atomic_file;
use std::io;
use std::path::{Path, PathBuf};

/// The files of one recorded trace, named after the trace's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    trace: PathBuf,
}

impl Recording {
    pub fn new(trace: impl Into<PathBuf>) -> Recording {
        Recording {
            trace: trace.into(),
        }
    }

    pub fn trace(&self) -> &Path {
        &self.trace
    }

    /// PM at the trace's start.
    pub fn initial_image(&self) -> PathBuf {
        self.beside(".initial")
    }

    /// The block device at the trace's start (traces with `blk-size`).
    pub fn initial_block_image(&self) -> PathBuf {
        self.beside(".blk-initial")
    }

    /// The guest's code symbols.
    pub fn symbols(&self) -> PathBuf {
        self.beside(".symbols")
    }

    /// Every file a recording may have: the trace first, then those beside it.
    pub fn files(&self) -> [PathBuf; 4] {
        [
            self.trace.clone(),
            self.initial_image(),
            self.initial_block_image(),
            self.symbols(),
        ]
    }

    /// Whether the trace and the PM it starts from are there (what replaying it needs).
    pub fn is_complete(&self) -> bool {
        self.trace.is_file() && self.initial_image().is_file()
    }

    /// Removes the recording and the temporary files of writers that never finished (a
    /// guest killed on a hang or panic). Best effort: what cannot be removed stays.
    pub fn remove(&self) {
        for file in self.files() {
            let _ = std::fs::remove_file(&file);
            atomic_file::remove_temporaries(&file);
        }
    }

    /// Makes `to` the same recording: each file that exists here, hard-linked where the
    /// file system allows, else copied.
    pub fn link_to(&self, to: &Recording) -> io::Result<()> {
        for (from, to) in self.files().iter().zip(to.files()) {
            if !from.is_file() {
                continue;
            }
            std::fs::hard_link(from, &to)
                .or_else(|_| std::fs::copy(from, &to).map(drop))
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot copy {} to {}: {e}", from.display(), to.display()),
                    )
                })?;
        }
        Ok(())
    }

    fn beside(&self, suffix: &str) -> PathBuf {
        let mut name = self.trace.as_os_str().to_owned();
        name.push(suffix);
        name.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_named_beside_the_trace_and_linked_and_removed_together() {
        let dir = tempfile::tempdir().unwrap();
        let from = Recording::new(dir.path().join("a.ptrace"));
        assert_eq!(
            from.files().map(|f| f.file_name().unwrap().to_owned()),
            [
                "a.ptrace",
                "a.ptrace.initial",
                "a.ptrace.blk-initial",
                "a.ptrace.symbols"
            ]
            .map(std::ffi::OsString::from)
        );
        for (n, file) in from.files().iter().enumerate() {
            // no block device: its initial image is absent
            if n != 2 {
                std::fs::write(file, [n as u8]).unwrap();
            }
        }
        assert!(from.is_complete());
        let to = Recording::new(dir.path().join("b/trace.ptrace"));
        std::fs::create_dir(dir.path().join("b")).unwrap();
        from.link_to(&to).unwrap();
        assert_eq!(std::fs::read(to.symbols()).unwrap(), [3]);
        assert!(!to.initial_block_image().exists());
        std::fs::write(atomic_file::temporary_path(&to.trace).unwrap(), b"x").unwrap();
        to.remove();
        assert_eq!(std::fs::read_dir(dir.path().join("b")).unwrap().count(), 0);
        assert!(from.is_complete(), "the source stays");
    }
}
