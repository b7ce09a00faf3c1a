//! Shared by the fs-dump and suite tests: scratch directories and running fs-dump.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory under the system temp dir, removed (with everything in it) on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(label: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = format!(
            "persim-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(unique);
        std::fs::create_dir(&path).expect("create a scratch directory");
        Scratch { path }
    }
}

/// Whether the tests run as root, who may chown and read everything: the owner of a
/// directory they create.
pub fn running_as_root() -> bool {
    let scratch = Scratch::new("uid");
    std::fs::metadata(&scratch.path).is_ok_and(|meta| meta.uid() == 0)
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Runs the fs-dump binary built for this test run.
pub fn fs_dump(args: &[&str], root: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fs-dump"))
        .args(args)
        .arg(root)
        .output()
        .expect("run fs-dump")
}

/// fs-dump's stdout, after checking that it succeeded.
pub fn dump(args: &[&str], root: &Path) -> String {
    let output = fs_dump(args, root);
    assert!(
        output.status.success(),
        "fs-dump {args:?} {} failed: {}",
        root.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("fs-dump prints UTF-8")
}
