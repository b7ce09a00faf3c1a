//! The one preflight of every VM test, in every crate, of the tests that need a kernel
//! module of targets/, and the one small file system of the tests of a full disk
//! (feature `testing`).

use crate::boot::Artifacts;
use crate::config::VmConfig;
use crate::error::VmError;
use crate::kernel::Kernel;
use crate::qemu::check_version;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Says that test `test` is skipped and why, where the test harness's log shows it: a
/// passing test's `eprintln!` is captured and dropped, a write to stderr itself is not.
pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIPPED {test}: {reason}\n");
    // Nothing better to do when stderr is gone.
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// This source tree's build, when QEMU, the configuration's kernel and the build are all
/// here; otherwise the test `test` is skipped with the reason, except under CI (`CI` set),
/// where the VM tests must run and this panics.
pub fn vm_ready(test: &str, config: &VmConfig) -> Option<Artifacts> {
    let ready = check_version()
        .and_then(|_| Kernel::for_config(config))
        .and_then(|_| Artifacts::of_source_tree());
    or_skip(test, ready)
}

/// The kernel module `name` (one of targets/, or a mutant such as
/// `dpwc-mutant-1/dm-dpwc`) as scripts/build-kmods.sh built it for the configuration's
/// kernel, `target/kmods/<release>/<name>.ko`; when it is not there,
/// the test is skipped (under CI it fails) as by [`vm_ready`].
pub fn kmod_ready(test: &str, config: &VmConfig, name: &str) -> Option<PathBuf> {
    or_skip(test, kmod(config, name, "run scripts/build-kmods.sh"))
}

/// As [`kmod_ready`] for a module an optional, slow setup step builds (OpenZFS's: `how`
/// says which step): when it is not there, the test is skipped with the reason, under CI
/// too.
pub fn optional_kmod_ready(
    test: &str,
    config: &VmConfig,
    name: &str,
    how: &str,
) -> Option<PathBuf> {
    kmod(config, name, how)
        .inspect_err(|e| skip(test, &format!("{e} (an optional setup step)")))
        .ok()
}

fn kmod(config: &VmConfig, name: &str, hint: &str) -> Result<PathBuf, VmError> {
    Kernel::for_config(config).and_then(|kernel| {
        let release = kernel.release().ok_or_else(|| VmError::Missing {
            what: format!("the release of the kernel {}", kernel.image.display()),
            hint: "build-kmods.sh builds for kernels with a modules directory".to_owned(),
        })?;
        let module = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/kmods")
            .join(release)
            .join(format!("{name}.ko"));
        match module.is_file() {
            true => Ok(module),
            false => Err(VmError::Missing {
                what: format!("the kernel module {}", module.display()),
                hint: hint.to_owned(),
            }),
        }
    })
}

/// What a preflight found, or None with the test skipped (a panic under CI).
fn or_skip<T>(test: &str, ready: Result<T, VmError>) -> Option<T> {
    match ready {
        Ok(found) => Some(found),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("{test}: {e}; CI must run the VM tests: run scripts/setup.sh")
        }
        Err(e) => {
            skip(test, &format!("{e} (run scripts/setup.sh)"));
            None
        }
    }
}

/// A tmpfs mounted by a test, unmounted when dropped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it: `2m`) on `dir`, creating it;
    /// None, with the reason printed, where the test may not mount (not root, in a
    /// container without the capability): test `test` is then skipped.
    pub fn mount(test: &str, dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).expect("creating a mount point");
        let options = format!("size={size}");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(dir)
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                skip(test, &format!("cannot mount a tmpfs: {}", why.trim()));
                None
            }
            Err(e) => {
                skip(test, &format!("cannot run mount: {e}"));
                None
            }
        }
    }

    /// Gives the file system `size` in place, keeping its files.
    pub fn resize(&self, size: &str) {
        let options = format!("remount,size={size}");
        let status = Command::new("mount")
            .args(["-o", &options])
            .arg(&self.0)
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "cannot resize the tmpfs on {}",
            self.0.display()
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[cfg(test)]
mod tests {
    use super::skip;
    use std::process::Command;

    /// Run only by the test below, as a child process.
    #[test]
    #[ignore = "a child of a_skipped_tests_reason_reaches_the_log_of_a_passing_run"]
    fn skipping_child() {
        skip("skipping_child", "the reason");
    }

    #[test]
    fn a_skipped_tests_reason_reaches_the_log_of_a_passing_run() {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "testing::tests::skipping_child"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("SKIPPED skipping_child: the reason\n"),
            "{stderr}"
        );
    }
}
