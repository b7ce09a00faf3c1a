//! Creating files atomically: write a temporary file next to the target, then rename it.
//! The one helper of its kind for every crate (traces, images, indexes, run-directory
//! records), so no two writers share a temporary name.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Creates `path` with contents written by `fill`, so that readers never see a partial file.
/// Without fsync: the goal is surviving a killed process, not a power cut.
pub fn create_atomically(
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

/// Writes `contents` to `path` atomically.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    create_atomically(path, |mut file| file.write_all(contents))
}

/// Copies `from` to `path` atomically, leaving holes where `from` has all-zero blocks, so
/// that a mostly empty PM image takes the disk space of its data only.
pub fn copy_sparse_atomically(from: &Path, path: &Path) -> io::Result<()> {
    const BLOCK: usize = 64 << 10;
    let mut source = File::open(from)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", from.display())))?;
    create_atomically(path, |mut file| {
        let mut buf = vec![0u8; BLOCK];
        let mut len = 0u64;
        loop {
            let n = read_full(&mut source, &mut buf)?;
            if n == 0 {
                break;
            }
            if buf[..n].iter().any(|&b| b != 0) {
                file.seek(SeekFrom::Start(len))?;
                file.write_all(&buf[..n])?;
            }
            len += n as u64;
        }
        file.set_len(len)
    })
}

/// Reads until `buf` is full or the end of the file; returns how much was read.
fn read_full(source: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// A name in the same directory (so the rename stays within one file system), unique per
/// process and call.
pub fn temporary_path(path: &Path) -> io::Result<PathBuf> {
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

/// Removes the temporary files [`temporary_path`] named for `path`, left by writers that
/// were killed before they could rename or remove them. Best effort.
pub fn remove_temporaries(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".tmp-");
    let Some(prefix) = prefix.to_str() else {
        return;
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(prefix))
        {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_sparse_copy_has_the_same_bytes_and_holes_for_zeros() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (from, to) = (dir.join("pm"), dir.join("copy"));
        let mut bytes = vec![0u8; 8 << 20];
        bytes[4096..4100].copy_from_slice(b"data");
        let last = bytes.len() - 1;
        bytes[last] = 7;
        fs::write(&from, &bytes).unwrap();
        copy_sparse_atomically(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), bytes);
        let allocated = fs::metadata(&to).unwrap().blocks() * 512;
        assert!(
            allocated <= 1 << 20,
            "{allocated} bytes allocated for 8 MiB of mostly zeros"
        );
        let names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    }

    #[test]
    fn temporaries_of_a_path_are_removed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let trace = dir.join("trace.ptrace");
        let left = temporary_path(&trace).unwrap();
        let other = temporary_path(&dir.join("images.json")).unwrap();
        for p in [&left, &other, &trace] {
            fs::write(p, b"x").unwrap();
        }
        remove_temporaries(&trace);
        assert!(!left.exists() && other.exists() && trace.exists());
    }
}
