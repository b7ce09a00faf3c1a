//! The raw baseline's target: a block device (`/dev/pmem0`) or a devdax character device
//! (`/dev/dax0.0`) that fio writes directly, with no file system in between. Checked
//! before a series starts: a device that holds a mounted file system (itself or one of its
//! partitions), or that another driver holds (device mapper, md), is refused, because fio
//! would overwrite it.

use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

const SYS_DEV: &str = "/sys/dev";
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// A device number as `/proc/self/mountinfo` and sysfs write it: `major:minor`.
fn dev_name(rdev: u64) -> String {
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

/// Checks the device `path` (a block or devdax device) for a raw series writing
/// `need_bytes`: returns its size in bytes.
pub fn check(path: &Path, need_bytes: u64) -> Result<u64, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("target {shown}: {e}"))?;
    let kind = if meta.file_type().is_block_device() {
        "block"
    } else {
        "char"
    };
    let dev = dev_name(meta.rdev());
    let sys = Path::new(SYS_DEV).join(kind).join(&dev);
    if kind == "char" && !is_dax(&sys) {
        return Err(format!(
            "target {shown} is a character device but not a devdax device; give a block \
             device, a devdax device (/dev/daxX.Y) or a directory"
        ));
    }
    let mountinfo = std::fs::read_to_string(MOUNTINFO).unwrap_or_default();
    let mut devices = vec![dev];
    devices.extend(partitions(&sys));
    if let Some((device, mount_point)) = mounted(&mountinfo, &devices) {
        return Err(format!(
            "target {shown} holds a mounted file system ({device} on {mount_point}); fio \
             would overwrite it: unmount it first, or give a directory on it to measure the \
             file system"
        ));
    }
    let holders = entries(&sys.join("holders"));
    if !holders.is_empty() {
        return Err(format!(
            "target {shown} is in use by {} (device mapper or md); fio would overwrite it: \
             give the device on top, or a directory on its file system",
            holders.join(", ")
        ));
    }
    // O_EXCL on a block device: exclusive, so it fails while anything else holds it
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(if kind == "block" { libc::O_EXCL } else { 0 })
        .open(path)
        .map_err(|e| format!("target {shown} cannot be opened for writing: {e}"))?;
    let size = device_size(&sys, kind)
        .ok_or_else(|| format!("target {shown}: its size is not in {}", sys.display()))?;
    if size < need_bytes {
        return Err(format!(
            "target {shown} has {} MiB, the largest run needs {} MiB (size × jobs); lower \
             --jobs or --fio-option size=",
            size >> 20,
            need_bytes >> 20
        ));
    }
    Ok(size)
}

/// Whether `path` is a block or character device (and so a raw target).
pub fn is_device(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_block_device() || t.is_char_device()
    })
}

fn is_dax(sys: &Path) -> bool {
    std::fs::read_link(sys.join("subsystem"))
        .is_ok_and(|s| s.file_name().is_some_and(|n| n == "dax"))
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The device numbers of a block device's partitions (its subdirectories with a
/// `partition` file).
fn partitions(sys: &Path) -> Vec<String> {
    entries(sys)
        .into_iter()
        .map(|name| sys.join(name))
        .filter(|d| d.join("partition").is_file())
        .filter_map(|d| std::fs::read_to_string(d.join("dev")).ok())
        .map(|s| s.trim().to_owned())
        .collect()
}

/// The first of `devices` (`major:minor`) that `mountinfo` has a mount of, and where.
fn mounted(mountinfo: &str, devices: &[String]) -> Option<(String, String)> {
    mountinfo.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (dev, mount_point) = (fields.get(2)?, fields.get(4)?);
        devices
            .iter()
            .find(|d| d == dev)
            .map(|d| (d.clone(), mount_point.to_string()))
    })
}

/// A block device's size from sysfs (512-byte sectors), a devdax device's (bytes).
fn device_size(sys: &Path, kind: &str) -> Option<u64> {
    let value: u64 = std::fs::read_to_string(sys.join("size"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(if kind == "block" { value * 512 } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of a real `/proc/self/mountinfo` (this machine's, with a pmem device added).
    const MOUNTINFO: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw
24 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=12G
61 22 259:0 / /mnt/pm rw,relatime shared:30 - ext4 /dev/pmem0 rw,dax=always
";

    #[test]
    fn a_mounted_device_or_partition_is_found_with_its_mount_point() {
        let found = mounted(MOUNTINFO, &["259:0".into()]);
        assert_eq!(found, Some(("259:0".into(), "/mnt/pm".into())));
        let partition = mounted(MOUNTINFO, &["259:2".into(), "259:1".into()]);
        assert_eq!(partition, Some(("259:1".into(), "/".into())));
        assert_eq!(mounted(MOUNTINFO, &["7:0".into()]), None);
    }

    #[test]
    fn sizes_and_partitions_come_from_a_recorded_sysfs_tree() {
        let sys = tempfile::tempdir().unwrap();
        let disk = sys.path();
        std::fs::write(disk.join("size"), "131072\n").unwrap();
        std::fs::create_dir(disk.join("pmem0p1")).unwrap();
        std::fs::write(disk.join("pmem0p1/partition"), "1\n").unwrap();
        std::fs::write(disk.join("pmem0p1/dev"), "259:3\n").unwrap();
        std::fs::create_dir(disk.join("queue")).unwrap();
        assert_eq!(partitions(disk), ["259:3"]);
        assert_eq!(device_size(disk, "block"), Some(64 << 20));
        assert_eq!(device_size(disk, "char"), Some(131072));
    }

    #[test]
    fn a_character_device_that_is_not_devdax_is_refused() {
        assert!(is_device(Path::new("/dev/null")));
        assert!(!is_device(Path::new("/tmp")));
        let err = check(Path::new("/dev/null"), 1).unwrap_err();
        assert!(err.contains("not a devdax device"), "{err}");
    }
}
