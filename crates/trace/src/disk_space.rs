//! Free disk space: how much a directory's file system has left, and which device that is,
//! so that a full disk is an error naming both before anything is half-written. The one
//! helper of its kind (the run directory's image window, the VM's scratch PM files).

use std::io;
use std::path::Path;

/// A directory's file system: its device and type (as `/proc/self/mounts` names them) and
/// the bytes an unprivileged writer may still use there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreeSpace {
    pub device: String,
    /// `ext4`, `xfs`, `tmpfs`... (empty where the mount table says nothing).
    pub fs_type: String,
    pub available: u64,
}

/// The free space of the file system holding `dir`.
pub fn free_space(dir: &Path) -> io::Result<FreeSpace> {
    let stat = rustix::fs::statvfs(dir).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(
            e.kind(),
            format!("cannot read the free space of {}: {e}", dir.display()),
        )
    })?;
    let (device, fs_type) = mount_of(dir).unwrap_or_else(|| {
        (
            format!("the file system of {}", dir.display()),
            String::new(),
        )
    });
    Ok(FreeSpace {
        device,
        fs_type,
        available: stat.f_bavail.saturating_mul(stat.f_frsize),
    })
}

/// Whether `error` says a file system is full (or the user's quota is used up).
pub fn is_full(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// Bytes as whole MiB, rounded up (what an error asks the user to free).
pub fn mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

/// The device and file-system type mounted at the longest mount point that holds `dir`
/// (the last one mounted there, where mounts are stacked).
fn mount_of(dir: &Path) -> Option<(String, String)> {
    let dir = dir.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let device = fields.next()?;
            // Spaces and other bytes in mount points are octal escapes (`\040`).
            let point = unescape(fields.next()?);
            let fs_type = fields.next().unwrap_or_default();
            dir.starts_with(&point)
                .then(|| (point.len(), (device.to_string(), fs_type.to_string())))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, mount)| mount)
}

fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest
            .get(at + 1..at + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_file_system_has_a_device_and_space() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_space(dir.path()).unwrap();
        assert!(!free.device.is_empty() && free.available > 0, "{free:?}");
        assert!(!free.fs_type.is_empty(), "{free:?}");
        assert!(free_space(&dir.path().join("gone")).is_err());
    }

    #[test]
    fn mount_points_are_unescaped_and_sizes_rounded_up() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(
            (mib(0), mib(1), mib(1 << 20), mib((1 << 20) + 1)),
            (0, 1, 1, 2)
        );
    }
}
