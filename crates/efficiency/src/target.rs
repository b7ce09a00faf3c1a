//! A series' targets: directories on mounted file systems, checked before a series starts
//! (writable, on the file system the user expects, room for fio's files; the mount table
//! and free space through `persim_trace::disk_space`), or a device for the raw baseline
//! ([`crate::device_target`]).

use crate::device_target;
use crate::fio::Place;
use persim_trace::disk_space::free_space;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A target as given on the command line: `DIR` or `DIR:FSTYPE` (refused unless `DIR` is
/// on a file system of that type), or a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSpec {
    pub dir: PathBuf,
    pub expect_fs: Option<String>,
}

impl TargetSpec {
    pub fn parse(text: &str) -> TargetSpec {
        if let Some((dir, fs)) = text.rsplit_once(':') {
            let word = !fs.is_empty() && fs.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if word && !dir.is_empty() {
                return TargetSpec {
                    dir: dir.into(),
                    expect_fs: Some(fs.into()),
                };
            }
        }
        TargetSpec {
            dir: text.into(),
            expect_fs: None,
        }
    }
}

/// A checked target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The directory, absolute; for the raw baseline the device.
    pub dir: PathBuf,
    /// Its name in tables, plots and result files (`tmpfs:/tmp/x`, `raw:/dev/pmem0`).
    pub label: String,
    /// The file system's type and device as `/proc/self/mounts` has them; `raw` and the
    /// device for a device.
    pub fs_type: String,
    pub device: String,
    /// fio writes the device `dir` directly.
    #[serde(default)]
    pub raw: bool,
}

/// The file system type a raw target is shown with.
pub const RAW: &str = "raw";

impl Target {
    /// Where fio's I/O goes: `work`, a directory of the target's, or the device.
    pub fn place<'a>(&'a self, work: &'a Path) -> Place<'a> {
        match self.raw {
            true => Place::Device(&self.dir),
            false => Place::Directory(work),
        }
    }
}

/// Checks `spec`: a writable directory on a mounted file system of the expected type with
/// `need_bytes` free, or a device fio may overwrite (`device_target::check`). The error
/// says what is wrong and what to do.
pub fn check(spec: &TargetSpec, need_bytes: u64) -> Result<Target, String> {
    let shown = spec.dir.display();
    if device_target::is_device(&spec.dir) {
        if let Some(fs) = &spec.expect_fs {
            return Err(format!(
                "target {shown}:{fs}: a device has no file system to check; give {shown} \
                 alone to write the device, or a directory on its file system"
            ));
        }
        device_target::check(&spec.dir, need_bytes)?;
        return Ok(Target {
            label: format!("{RAW}:{shown}"),
            dir: spec.dir.clone(),
            fs_type: RAW.into(),
            device: shown.to_string(),
            raw: true,
        });
    }
    let dir = spec.dir.canonicalize().map_err(|e| {
        format!("target {shown}: {e}; give a directory on the file system to measure")
    })?;
    if !dir.is_dir() {
        return Err(format!(
            "target {shown} is not a directory; give a directory on the file system to measure"
        ));
    }
    let free = free_space(&dir).map_err(|e| format!("target {shown}: {e}"))?;
    let (fs_type, device) = (free.fs_type, free.device);
    if let Some(want) = &spec.expect_fs {
        if *want != fs_type {
            return Err(format!(
                "target {shown} is on {fs_type} ({device}), not {want}; mount {want} there or \
                 give another directory"
            ));
        }
    }
    let probe = dir.join(format!(".persim-efficiency-probe.{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| format!("target {shown} is not writable: {e}"))?;
    if free.available < need_bytes {
        return Err(format!(
            "target {shown} has {} MiB free, the largest run needs {} MiB (size × jobs); free \
             space or lower --jobs or --fio-option size=",
            free.available >> 20,
            need_bytes >> 20
        ));
    }
    Ok(Target {
        label: format!("{fs_type}:{}", dir.display()),
        dir,
        fs_type,
        device,
        raw: false,
    })
}

/// A fio size (`100M`, `1g`, `4096`): fio's k/m/g/t are powers of 1024.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text
        .trim()
        .trim_end_matches(['b', 'B'])
        .trim_end_matches(['i', 'I']);
    let (number, scale) = match t.chars().last()?.to_ascii_lowercase() {
        'k' => (&t[..t.len() - 1], 1u64 << 10),
        'm' => (&t[..t.len() - 1], 1 << 20),
        'g' => (&t[..t.len() - 1], 1 << 30),
        't' => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    number.parse::<u64>().ok().map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_specs() {
        assert_eq!(
            TargetSpec::parse("/mnt/pm:ext4"),
            TargetSpec {
                dir: "/mnt/pm".into(),
                expect_fs: Some("ext4".into())
            }
        );
        assert_eq!(TargetSpec::parse("/mnt/pm").expect_fs, None);
        assert_eq!(TargetSpec::parse("/a:b/c").expect_fs, None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100M"), Some(100 << 20));
        assert_eq!(parse_size("16k"), Some(16 << 10));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("lots"), None);
    }

    #[test]
    fn a_real_directory_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let t = check(&TargetSpec::parse(dir.path().to_str().unwrap()), 1).unwrap();
        assert!(
            t.label.ends_with(dir.path().to_str().unwrap()),
            "{}",
            t.label
        );
        let wrong = format!("{}:nosuchfs", dir.path().display());
        let err = check(&TargetSpec::parse(&wrong), 1).unwrap_err();
        assert!(err.contains("not nosuchfs"), "{err}");
        let err = check(&TargetSpec::parse(dir.path().to_str().unwrap()), u64::MAX).unwrap_err();
        assert!(err.contains("free"), "{err}");
        let err = check(&TargetSpec::parse("/nonexistent/dir"), 1).unwrap_err();
        assert!(err.contains("/nonexistent/dir"), "{err}");
    }
}
