//! What the cache directory holds (`Machine::default_cache_dir`): booted snapshots
//! (`booted-<key>.qemu`, one per kernel, initramfs and configuration), initramfs images
//! (`initramfs-<hash>.cpio`) and kernel symbol lists (`kallsyms-<key>.modules`). Each is
//! made again when missing, so any of them may go; `persim cache` lists and prunes them.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The kinds of file the cache keeps: (file name prefix, suffix, what it is).
const KINDS: [(&str, &str, &str); 3] = [
    ("booted-", ".qemu", "booted snapshot"),
    ("initramfs-", ".cpio", "initramfs"),
    ("kallsyms-", ".modules", "kernel symbols"),
];

/// One file of the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    pub path: PathBuf,
    /// What it is (`booted snapshot`, `initramfs`, `kernel symbols`).
    pub kind: &'static str,
    pub bytes: u64,
    /// When it was last read or written (the later of its access and modification times).
    pub last_used: SystemTime,
}

/// The cache's files in `dir`, least recently used first; other files are not the cache's
/// and are left out. A missing directory is an empty cache.
pub fn cache_entries(dir: &Path) -> std::io::Result<Vec<CacheEntry>> {
    let read = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        other => other?,
    };
    let mut entries = Vec::new();
    for item in read {
        let item = item?;
        let name = item.file_name().to_string_lossy().into_owned();
        let Some(&(_, _, kind)) = (KINDS.iter())
            .find(|(prefix, suffix, _)| name.starts_with(prefix) && name.ends_with(suffix))
        else {
            continue;
        };
        let meta = item.metadata()?;
        let modified = meta.modified()?;
        let accessed = meta.accessed().unwrap_or(modified);
        entries.push(CacheEntry {
            path: item.path(),
            kind,
            bytes: meta.len(),
            last_used: accessed.max(modified),
        });
    }
    entries.sort_by_key(|e| (e.last_used, e.path.clone()));
    Ok(entries)
}

/// Removes the cache's files last used before `before`; returns those removed.
pub fn prune_cache(dir: &Path, before: SystemTime) -> std::io::Result<Vec<CacheEntry>> {
    let old: Vec<CacheEntry> = (cache_entries(dir)?.into_iter())
        .filter(|e| e.last_used < before)
        .collect();
    for entry in &old {
        match std::fs::remove_file(&entry.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(old)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{File, FileTimes};
    use std::time::Duration;

    fn make(dir: &Path, name: &str, days_ago: u64) {
        let file = File::create(dir.join(name)).unwrap();
        file.set_len(days_ago * 10).unwrap();
        let at = SystemTime::now() - Duration::from_secs(days_ago * 86_400);
        file.set_times(FileTimes::new().set_accessed(at).set_modified(at))
            .unwrap();
    }

    #[test]
    fn entries_are_the_caches_own_files_and_pruning_keeps_the_recent_ones() {
        let dir = tempfile::tempdir().unwrap();
        make(dir.path(), "booted-0123456789abcdef.qemu", 30);
        make(dir.path(), "initramfs-00ff.cpio", 1);
        make(dir.path(), "kallsyms-ab.modules", 10);
        make(dir.path(), "notes.txt", 40);
        let entries = cache_entries(dir.path()).unwrap();
        let kinds: Vec<&str> = entries.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["booted snapshot", "kernel symbols", "initramfs"]);
        assert_eq!(entries[0].bytes, 300);
        let week = SystemTime::now() - Duration::from_secs(7 * 86_400);
        let removed = prune_cache(dir.path(), week).unwrap();
        assert_eq!(removed.len(), 2);
        let left: Vec<&str> = (cache_entries(dir.path()).unwrap().iter())
            .map(|e| e.kind)
            .collect();
        assert_eq!(left, ["initramfs"]);
        assert!(dir.path().join("notes.txt").exists(), "not the cache's");
        assert!(cache_entries(&dir.path().join("none")).unwrap().is_empty());
    }
}
