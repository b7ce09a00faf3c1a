//! The QEMU command line for a Persim guest and the QEMU version check.

use crate::error::VmError;
use std::path::PathBuf;
use std::process::Command;

pub const QEMU_BINARY: &str = "qemu-system-x86_64";
/// The TCG plugin API the plugin is built against (qemu-plugin feature plugin-api-v4)
/// ships with QEMU 10.0.
pub const MIN_QEMU_MAJOR: u32 = 10;

/// Guest-physical base of the NVDIMM: QEMU's pc machine puts hot-pluggable device memory
/// at 4 GiB when all RAM fits below the PCI hole, and the only NVDIMM is plugged first.
/// The runner checks it against what the guest kernel reports (see `Vm::pm_range`).
pub const PM_BASE: u64 = 1 << 32;
/// The pc machine keeps RAM below 4 GiB up to this size; larger RAM would move PM_BASE.
pub const MAX_MEMORY_MIB: u64 = 2816;

#[derive(Clone, Debug)]
pub struct Plugin {
    pub library: PathBuf,
    /// `key=value` arguments.
    pub args: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct QemuSpec {
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    pub memory_mib: u64,
    pub pm_file: PathBuf,
    pub pm_size: u64,
    pub plugin: Option<Plugin>,
}

impl QemuSpec {
    pub fn args(&self) -> Vec<String> {
        let pm_mib = self.pm_size >> 20;
        let maxmem_mib = (self.memory_mib + pm_mib).div_ceil(1024) * 1024 + 1024;
        let mut args: Vec<String> = [
            "-machine",
            "pc,nvdimm=on",
            "-cpu",
            "max",
            "-smp",
            "1",
            "-accel",
            "tcg",
            "-nic",
            "none",
            "-display",
            "none",
            "-monitor",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
        ]
        .map(str::to_owned)
        .into();
        args.push("-m".into());
        args.push(format!("{}M,slots=2,maxmem={maxmem_mib}M", self.memory_mib));
        args.push("-object".into());
        args.push(format!(
            "memory-backend-file,id=pm0,share=on,mem-path={},size={}",
            self.pm_file.display(),
            self.pm_size
        ));
        args.push("-device".into());
        args.push("nvdimm,id=nvdimm0,memdev=pm0".into());
        args.push("-kernel".into());
        args.push(self.kernel.display().to_string());
        args.push("-initrd".into());
        args.push(self.initramfs.display().to_string());
        args.push("-append".into());
        // panic=-1 with -no-reboot turns a guest panic into a QEMU exit instead of a hang.
        args.push("console=ttyS0 panic=-1 loglevel=4 nokaslr no_timer_check rdinit=/init".into());
        if let Some(plugin) = &self.plugin {
            // The plugin's messages (qemu_plugin_outs) go to stderr only with `-d plugin`.
            args.push("-d".into());
            args.push("plugin".into());
            args.push("-plugin".into());
            let mut value = plugin.library.display().to_string();
            for arg in &plugin.args {
                value.push(',');
                value.push_str(arg);
            }
            args.push(value);
        }
        args
    }
}

/// Fails with a clear message unless QEMU >= 10 is installed.
pub fn check_version() -> Result<String, VmError> {
    let hint =
        "run `sudo scripts/setup.sh` (installs qemu-system-x86 >= 10 from bookworm-backports)";
    let out = Command::new(QEMU_BINARY)
        .arg("--version")
        .output()
        .map_err(|_| VmError::Missing {
            what: QEMU_BINARY.to_owned(),
            hint: hint.to_owned(),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = parse_version(&text).ok_or_else(|| VmError::Missing {
        what: format!(
            "a QEMU version in `{QEMU_BINARY} --version` output ({})",
            text.trim()
        ),
        hint: hint.to_owned(),
    })?;
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < MIN_QEMU_MAJOR {
        return Err(VmError::Missing {
            what: format!("QEMU >= {MIN_QEMU_MAJOR} (found {version})"),
            hint: hint.to_owned(),
        });
    }
    Ok(version)
}

/// "QEMU emulator version 10.0.2 (Debian ...)" -> "10.0.2"
fn parse_version(text: &str) -> Option<String> {
    let rest = text.split("version").nth(1)?;
    rest.split_whitespace().next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_read_from_the_banner() {
        let banner =
            "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\nCopyright";
        assert_eq!(parse_version(banner).as_deref(), Some("10.0.2"));
        assert_eq!(parse_version("nonsense"), None);
    }

    #[test]
    fn command_line_has_nvdimm_plugin_and_no_network() {
        let spec = QemuSpec {
            kernel: "/boot/vmlinuz".into(),
            initramfs: "/tmp/i.cpio".into(),
            memory_mib: 512,
            pm_file: "/tmp/pm".into(),
            pm_size: 64 << 20,
            plugin: Some(Plugin {
                library: "/p.so".into(),
                args: vec!["pm_base=1".into(), "trace=/t".into()],
            }),
        };
        let args = spec.args();
        let joined = args.join(" ");
        assert!(joined.contains("-machine pc,nvdimm=on"), "{joined}");
        assert!(joined.contains("-nic none"));
        assert!(joined.contains("-m 512M,slots=2,maxmem=2048M"), "{joined}");
        assert!(joined.contains("mem-path=/tmp/pm,size=67108864"));
        assert!(args.contains(&"/p.so,pm_base=1,trace=/t".to_owned()));
    }
}
