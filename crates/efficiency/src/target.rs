//! A series' targets: directories on mounted file systems, checked before a series starts
//! (writable, on the file system the user expects, room for fio's files).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A target as given on the command line: `DIR` or `DIR:FSTYPE` (refused unless `DIR` is
/// on a file system of that type).
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
    /// The directory, absolute.
    pub dir: PathBuf,
    /// Its name in tables, plots and result files (`tmpfs:/tmp/x`).
    pub label: String,
    /// The file system's type and source as `/proc/self/mountinfo` has them.
    pub fs_type: String,
    pub device: String,
}

/// Checks `spec`: a writable directory on a mounted file system of the expected type with
/// `need_bytes` free. The error says what is wrong and what to do.
pub fn check(spec: &TargetSpec, need_bytes: u64) -> Result<Target, String> {
    let shown = spec.dir.display();
    let dir = spec.dir.canonicalize().map_err(|e| {
        format!("target {shown}: {e}; give a directory on the file system to measure")
    })?;
    if !dir.is_dir() {
        return Err(format!(
            "target {shown} is not a directory; give a directory on the file system to measure"
        ));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let (fs_type, device) = mount_of(&mountinfo, &dir)
        .ok_or_else(|| format!("target {shown}: no mount holds it in /proc/self/mountinfo"))?;
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
    let free = free_bytes(&dir)?;
    if free < need_bytes {
        return Err(format!(
            "target {shown} has {} MiB free, the largest run needs {} MiB (size × jobs); free \
             space or lower --jobs or --fio-option size=",
            free >> 20,
            need_bytes >> 20
        ));
    }
    Ok(Target {
        label: format!("{fs_type}:{}", dir.display()),
        dir,
        fs_type,
        device,
    })
}

/// The type and source of the mount that holds `dir` (the longest mount point that is a
/// prefix of it; the last such line where mounts are stacked).
pub fn mount_of(mountinfo: &str, dir: &Path) -> Option<(String, String)> {
    let mut best: Option<(usize, String, String)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(mount_point), Some(fs_type), Some(source)) =
            (fields.get(4), fields.get(dash + 1), fields.get(dash + 2))
        else {
            continue;
        };
        let mount_point = unescape(mount_point);
        if dir.starts_with(&mount_point) {
            let depth = Path::new(&mount_point).components().count();
            if best.as_ref().is_none_or(|b| depth >= b.0) {
                best = Some((depth, fs_type.to_string(), source.to_string()));
            }
        }
    }
    best.map(|(_, t, s)| (t, s))
}

/// mountinfo writes space, tab, newline and backslash in octal (`\040`).
fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(char::from(c));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn free_bytes(dir: &Path) -> Result<u64, String> {
    let st =
        rustix::fs::statvfs(dir).map_err(|e| format!("cannot statvfs {}: {e}", dir.display()))?;
    Ok(st.f_bavail * st.f_frsize)
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

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw,size=8g
41 30 7:0 / /tmp/my\\040disk rw,relatime shared:9 - xfs /dev/loop0 rw,dax=always
42 22 259:1 / /mnt/pm rw master:3 - ext4 /dev/pmem0 rw,dax=always
";

    #[test]
    fn the_longest_mount_point_holds_the_directory() {
        let m = |d: &str| mount_of(MOUNTINFO, Path::new(d)).unwrap();
        assert_eq!(m("/home/x"), ("ext4".into(), "/dev/sda1".into()));
        assert_eq!(m("/tmp/a"), ("tmpfs".into(), "tmpfs".into()));
        assert_eq!(m("/tmp/my disk/sub"), ("xfs".into(), "/dev/loop0".into()));
        assert_eq!(m("/mnt/pm"), ("ext4".into(), "/dev/pmem0".into()));
        // a prefix of the name is not a parent directory
        assert_eq!(m("/mnt/pmem"), ("ext4".into(), "/dev/sda1".into()));
    }

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
