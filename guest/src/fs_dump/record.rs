//! What fs-dump prints for one path: its lstat fields, and a file's contents or a
//! symlink's target.

use crate::options::Options;
use crate::text::{hex, lossless};
use std::collections::BTreeMap;
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Text(String),
    Number(u64),
    Flag(bool),
}

/// A path's fields by name; a `BTreeMap` so they print sorted.
pub type Record = BTreeMap<&'static str, Value>;

/// Linux's O_NOATIME (x86_64): reading contents must not change the atime being dumped.
const O_NOATIME: i32 = 0o1000000;

/// The record of `path`, whose lstat result is `meta`.
pub fn describe(path: &Path, meta: &Metadata, options: &Options) -> Record {
    let mut record = Record::new();
    let time = |seconds: i64, nanos: i64| Value::Text(format!("{seconds}.{nanos:09}"));
    record.insert("type", Value::Text(kind(meta).into()));
    record.insert("mode", Value::Text(format!("{:04o}", meta.mode() & 0o7777)));
    record.insert("uid", Value::Number(meta.uid().into()));
    record.insert("gid", Value::Number(meta.gid().into()));
    record.insert("nlink", Value::Number(meta.nlink()));
    record.insert("size", Value::Number(meta.size()));
    record.insert("ino", Value::Number(meta.ino()));
    record.insert("blocks", Value::Number(meta.blocks()));
    record.insert("atime", time(meta.atime(), meta.atime_nsec()));
    record.insert("mtime", time(meta.mtime(), meta.mtime_nsec()));
    record.insert("ctime", time(meta.ctime(), meta.ctime_nsec()));
    let file_type = meta.file_type();
    if file_type.is_char_device() || file_type.is_block_device() {
        record.insert("rdev", Value::Text(device_number(meta.rdev())));
    }
    let read = if file_type.is_file() && options.wants("contents") {
        add_contents(&mut record, path, options.max_content)
    } else if file_type.is_symlink() && options.wants("target") {
        std::fs::read_link(path)
            .map(|target| {
                let target = lossless(target.as_os_str().as_bytes());
                record.insert("target", Value::Text(target));
            })
            .map_err(|e| format!("cannot read the symlink target: {e}"))
    } else {
        Ok(())
    };
    if let Err(message) = read {
        record.insert("error", Value::Text(message));
    }
    if options.wants("xattrs") {
        match xattrs(path) {
            Ok(None) => {}
            Ok(Some(list)) => {
                record.insert("xattrs", Value::Text(list));
            }
            Err(e) => {
                record.insert("error", Value::Text(format!("cannot read the xattrs: {e}")));
            }
        }
    }
    record.retain(|field, _| options.wants(field));
    record
}

/// The extended attributes as `name=HEXVALUE` sorted by name and joined by `,`; None
/// when there are none (or the file system has none), so dumps without them are unchanged.
fn xattrs(path: &Path) -> std::io::Result<Option<String>> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let os_error = std::io::Error::last_os_error;
    // SAFETY: a NUL-terminated path; a null buffer of length 0 asks for the size.
    let size = unsafe { libc::llistxattr(c_path.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        let e = os_error();
        return match e.raw_os_error() {
            Some(libc::ENOTSUP) => Ok(None),
            _ => Err(e),
        };
    }
    let mut names = vec![0u8; size as usize];
    // SAFETY: the buffer holds `names.len()` bytes.
    let size = unsafe { libc::llistxattr(c_path.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if size < 0 {
        return Err(os_error());
    }
    names.truncate(size as usize);
    let mut entries: Vec<String> = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let c_name = std::ffi::CString::new(name)?;
        let mut value = vec![0u8; 64 << 10];
        // SAFETY: NUL-terminated strings; the buffer holds `value.len()` bytes.
        let len = unsafe {
            libc::lgetxattr(
                c_path.as_ptr(),
                c_name.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if len < 0 {
            return Err(os_error());
        }
        value.truncate(len as usize);
        entries.push(format!("{}={}", lossless(name), hex(&value)));
    }
    entries.sort();
    Ok((!entries.is_empty()).then(|| entries.join(",")))
}

fn kind(meta: &Metadata) -> &'static str {
    let file_type = meta.file_type();
    if file_type.is_file() {
        "file"
    } else if file_type.is_dir() {
        "dir"
    } else if file_type.is_symlink() {
        "symlink"
    } else if file_type.is_fifo() {
        "fifo"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_char_device() {
        "char"
    } else if file_type.is_block_device() {
        "block"
    } else {
        "unknown"
    }
}

/// `MAJOR:MINOR` of a device number in glibc's encoding.
fn device_number(rdev: u64) -> String {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    format!("{major}:{minor}")
}

/// Adds `contents` (valid UTF-8) or `contents_hex`, and for a file longer than `max`,
/// `contents_len` and `contents_truncated`. The whole file is read even then, so a read
/// error anywhere in it is reported.
fn add_contents(record: &mut Record, path: &Path, max: Option<usize>) -> Result<(), String> {
    let mut file = open_without_atime(path).map_err(|e| format!("cannot open: {e}"))?;
    let mut kept = Vec::new();
    let mut total: u64 = 0;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read the contents at byte {total}: {e}")),
        };
        let room = max.map_or(n, |max| max.saturating_sub(kept.len()).min(n));
        kept.extend_from_slice(&buffer[..room]);
        total += n as u64;
    }
    match String::from_utf8(kept) {
        Ok(text) => record.insert("contents", Value::Text(text)),
        Err(bytes) => record.insert("contents_hex", Value::Text(hex(bytes.as_bytes()))),
    };
    if max.is_some_and(|max| total > max as u64) {
        record.insert("contents_len", Value::Number(total));
        record.insert("contents_truncated", Value::Flag(true));
    }
    Ok(())
}

/// O_NOATIME is refused (EPERM) to a caller that neither owns the file nor is
/// privileged; such a caller opens it plainly.
fn open_without_atime(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(O_NOATIME)
        .open(path)
        .or_else(|_| File::open(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_split_into_major_and_minor() {
        // /dev/null is 1:3, /dev/sda1 8:1, and a large minor uses the high bits.
        assert_eq!(device_number(0x103), "1:3");
        assert_eq!(device_number(0x801), "8:1");
        assert_eq!(device_number((259 << 8) | (0x12 << 20) | 0x34), "259:4660");
    }
}
