//! Walks the tree under ROOT without following symlinks.

use crate::options::Options;
use crate::record::{describe, Record, Value};
use crate::text::lossless;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Every path under the root (the root included) by its printed name.
pub type Dump = BTreeMap<String, Record>;

/// Dumps `options.root`. Only an unreadable root is an error; an entry below it that
/// cannot be read gets an `error` field, because on a crashed file system that is a result.
pub fn dump(options: &Options) -> Result<Dump, String> {
    let root = trim_trailing_slashes(&options.root);
    let meta = std::fs::symlink_metadata(&root)
        .map_err(|e| format!("cannot read ROOT {}: {e}", root.display()))?;
    let mut dump = Dump::new();
    visit(&root, &meta, options, &mut Vec::new(), &mut dump);
    Ok(dump)
}

/// `/mnt/` and `/mnt` are the same root and must give the same keys.
fn trim_trailing_slashes(root: &Path) -> PathBuf {
    let bytes = root.as_os_str().as_bytes();
    let end = bytes
        .iter()
        .rposition(|&b| b != b'/')
        .map_or(1, |last| last + 1);
    PathBuf::from(std::ffi::OsStr::from_bytes(&bytes[..end.min(bytes.len())]))
}

/// Records `path` and, for a directory, everything below it. `ancestors` holds the
/// (device, inode) of the directories above, so a corrupted file system whose directory
/// links back to an ancestor is reported instead of walked forever.
fn visit(
    path: &Path,
    meta: &std::fs::Metadata,
    options: &Options,
    ancestors: &mut Vec<(u64, u64)>,
    dump: &mut Dump,
) {
    let key = lossless(path.as_os_str().as_bytes());
    let mut record = describe(path, meta, options);
    if meta.is_dir() {
        let id = (meta.dev(), meta.ino());
        if ancestors.contains(&id) {
            let message = "directory cycle: the same inode as a directory above it";
            record.insert("error", Value::Text(message.into()));
        } else {
            ancestors.push(id);
            if let Err(message) = visit_children(path, options, ancestors, dump) {
                record.insert("error", Value::Text(message));
            }
            ancestors.pop();
        }
    }
    dump.insert(key, record);
}

fn visit_children(
    dir: &Path,
    options: &Options,
    ancestors: &mut Vec<(u64, u64)>,
    dump: &mut Dump,
) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list all entries: {e}"))?;
        if options.excludes(&entry.file_name()) {
            continue;
        }
        let path = entry.path();
        match std::fs::symlink_metadata(&path) {
            Ok(meta) => visit(&path, &meta, options, ancestors, dump),
            Err(e) => {
                let error = Value::Text(format!("cannot lstat: {e}"));
                let key = lossless(path.as_os_str().as_bytes());
                dump.insert(key, Record::from([("error", error)]));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_slashes_do_not_change_the_root() {
        assert_eq!(
            trim_trailing_slashes(Path::new("/mnt//")),
            Path::new("/mnt")
        );
        assert_eq!(trim_trailing_slashes(Path::new("/mnt")), Path::new("/mnt"));
        assert_eq!(trim_trailing_slashes(Path::new("/")), Path::new("/"));
        assert_eq!(trim_trailing_slashes(Path::new("//")), Path::new("/"));
    }
}
