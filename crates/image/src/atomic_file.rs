//! Creating files atomically: write a temporary file next to the target, then rename it.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Creates `path` with contents written by `fill`, so that readers never see a partial file.
/// Without fsync: the goal is surviving a killed process, not a power cut.
pub(crate) fn create_atomically(
    path: &Path,
    fill: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temporary_path(path)?;
    let result = File::create_new(&tmp)
        .and_then(|file| fill(&file))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(|e| io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))
}

/// A name in the same directory (so the rename stays within one file system), unique per
/// process and call.
pub(crate) fn temporary_path(path: &Path) -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    })?;
    let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}-{unique}", std::process::id()));
    Ok(path.with_file_name(tmp_name))
}
