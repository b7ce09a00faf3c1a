//! The QEMU command line for a Persim guest and the QEMU version check.

use crate::error::VmError;
use persim_abi::machine::{KERNEL_4_LEVEL_PAGING, KERNEL_NOKASLR, PM_BASE};
use persim_abi::PluginArgs;
use std::path::PathBuf;
use std::process::Command;

pub const QEMU_BINARY: &str = "qemu-system-x86_64";

/// The guest's wall clock at boot; it then runs with the VM.
const GUEST_CLOCK_BASE: &str = "base=2026-01-01T00:00:00,clock=vm";
/// A fixed shift: `auto` adapts to the host's speed, which differs between runs.
const GUEST_ICOUNT: &str = "shift=3";

/// The TCG plugin API the plugin is built against (qemu-plugin feature plugin-api-v4)
/// ships with QEMU 10.0.
pub const MIN_QEMU_MAJOR: u32 = 10;

/// The pc machine keeps RAM below 4 GiB up to this size; larger RAM would move
/// [`PM_BASE`] (see there).
pub const MAX_MEMORY_MIB: u64 = 2816;
const _: () = assert!(MAX_MEMORY_MIB << 20 < PM_BASE);

#[derive(Clone, Debug)]
pub struct Plugin {
    pub library: PathBuf,
    pub args: PluginArgs,
}

#[derive(Clone, Debug)]
pub struct QemuSpec {
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    pub memory_mib: u64,
    pub pm_file: PathBuf,
    pub pm_size: u64,
    /// The host file behind the NVMe namespace, with the configuration's `nvme_size_mib`.
    pub blk_file: Option<PathBuf>,
    pub plugin: Option<Plugin>,
    /// Where booted snapshots are kept (`crate::snapshot`): with a directory, the guest is
    /// restored from the snapshot of its kind if there is one, else booted and saved.
    /// Only for guests that attach the NVDIMM again before using PM contents.
    pub snapshots: Option<PathBuf>,
    /// Guest time counts instructions (`-icount`): with the first commands a guest runs
    /// (`Vm::boot_running`), a reproducible run (docs/design/tracer.md, "Reproducibility").
    pub icount: bool,
    /// The configuration's `kernel_args`, after Persim's own command line.
    pub kernel_args: String,
    /// Virtual CPUs: 1 for every traced run (the plugin records one vCPU's order); more
    /// only for guests that do not trace: pm-throttle's writers, or a counting guest's
    /// fio jobs (`RecordOptions::cpus`).
    pub cpus: u32,
    pub qemu_version: String,
}

impl QemuSpec {
    /// The arguments of `qemu-system-x86_64`.
    pub fn args(&self) -> Vec<String> {
        self.args_with(&self.pm_file, self.plugin.as_ref())
    }

    /// The booted snapshot of guests like this one: the same QEMU, machine, kernel and
    /// initramfs, whatever their PM file and plugin (neither changes the guest's boot).
    pub(crate) fn snapshot_file(&self, dir: &std::path::Path) -> PathBuf {
        let mut args = self.args_with(std::path::Path::new("PM"), None);
        // a kernel rebuilt at the same path is another kernel
        if let Ok(meta) = std::fs::metadata(&self.kernel) {
            let modified = meta
                .modified()
                .ok()
                .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |since| since.as_nanos());
            args.push(format!(
                "kernel modified {modified} ns, {} bytes",
                meta.len()
            ));
        }
        crate::snapshot::snapshot_file(dir, &self.qemu_version, &args)
    }

    fn args_with(&self, pm_file: &std::path::Path, plugin: Option<&Plugin>) -> Vec<String> {
        let pm_mib = self.pm_size >> 20;
        let maxmem_mib = (self.memory_mib + pm_mib).div_ceil(1024) * 1024 + 1024;
        let mut args: Vec<String> = [
            "-machine",
            "pc,nvdimm=on",
            "-cpu",
            "max",
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
            // Fewer differences between runs (docs/design/tracer.md, "Reproducibility"): the guest's
            // clock starts at a fixed date, and RDRAND under TCG is a seeded generator.
            "-rtc",
            GUEST_CLOCK_BASE,
            "-seed",
            "1",
        ]
        .map(str::to_owned)
        .into();
        args.push("-smp".into());
        args.push(self.cpus.to_string());
        if self.icount {
            // Guest time counts instructions (8 ns each), not the host's time.
            args.push("-icount".into());
            args.push(GUEST_ICOUNT.into());
        }
        args.push("-m".into());
        args.push(format!("{}M,slots=2,maxmem={maxmem_mib}M", self.memory_mib));
        args.push("-object".into());
        args.push(format!(
            "memory-backend-file,id=pm0,share=on,mem-path={},size={}",
            pm_file.display(),
            self.pm_size
        ));
        args.push("-device".into());
        args.push("nvdimm,id=nvdimm0,memdev=pm0".into());
        if let Some(blk_file) = &self.blk_file {
            // The thesis' worst-case SSD: a volatile write cache (flushes matter) and
            // 512-byte atomic blocks. `dbcs=off`: without shadow doorbells every submission
            // and completion is a register store the tracing plugin sees. `discard=unmap`:
            // a deallocated block then reads as zeros, as the controller says (DLFEAT) and
            // the trace records it; QEMU ignores discards by default and keeps the data.
            args.push("-drive".into());
            args.push(format!(
                "file={},if=none,id=nvm,format=raw,cache=writeback,discard=unmap",
                blk_file.display()
            ));
            args.push("-device".into());
            args.push(
                "nvme,serial=persim,drive=nvm,dbcs=off,write-cache=on,\
                 logical_block_size=512,physical_block_size=512"
                    .into(),
            );
        }
        args.push("-kernel".into());
        args.push(self.kernel.display().to_string());
        args.push("-initrd".into());
        args.push(self.initramfs.display().to_string());
        args.push("-append".into());
        let mut command_line = kernel_command_line();
        if self.blk_file.is_some() {
            // PRPs only: the plugin decodes no scatter-gather lists.
            command_line.push_str(" nvme.sgl_threshold=0");
        }
        if !self.kernel_args.trim().is_empty() {
            command_line.push(' ');
            command_line.push_str(self.kernel_args.trim());
        }
        args.push(command_line);
        if let Some(plugin) = plugin {
            // The plugin's messages (qemu_plugin_outs) go to stderr only with `-d plugin`.
            args.push("-d".into());
            args.push("plugin".into());
            args.push("-plugin".into());
            let mut value = plugin.library.display().to_string();
            for arg in plugin.args.to_args() {
                value.push(',');
                // QEMU's option syntax: a comma within a value is written twice.
                value.push_str(&arg.replace(',', ",,"));
            }
            args.push(value);
        }
        args
    }
}

/// panic=-1 with -no-reboot turns a guest panic into a QEMU exit instead of a hang; the
/// tracing plugin's address arithmetic needs [`KERNEL_NOKASLR`] and 4-level paging (see
/// there; `-cpu max` offers 5-level paging, which moves the direct map).
fn kernel_command_line() -> String {
    format!(
        "console=ttyS0 panic=-1 loglevel=4 {KERNEL_NOKASLR} {KERNEL_4_LEVEL_PAGING} \
         no_timer_check rdinit=/init"
    )
}

/// Parameters that `kernel_args` must not set besides those of [`kernel_command_line`]:
/// they would undo a required one (`kaslr`, `init`), move memory under the NVDIMM
/// (`memmap`, `mem`, `efi_fake_mem`), or change what the NVMe tracing needs.
const RESERVED_KERNEL_ARGS: [&str; 6] = [
    "kaslr",
    "init",
    "memmap",
    "mem",
    "efi_fake_mem",
    "nvme.sgl_threshold",
];

/// Checks a configuration's `kernel_args`: one line of printable text that sets none of
/// the parameters Persim sets or relies on. The message names the parameter.
pub(crate) fn check_kernel_args(args: &str) -> Result<(), String> {
    if let Some(c) = args.chars().find(|c| c.is_control()) {
        return Err(format!(
            "`kernel_args` holds the control character {c:?}: give the parameters on one line, \
             separated by spaces"
        ));
    }
    // The kernel reads `-` and `_` in a parameter's name alike.
    let name = |word: &str| word.split('=').next().unwrap_or("").replace('-', "_");
    let own = kernel_command_line();
    let reserved: Vec<String> = own
        .split(' ')
        .map(name)
        .chain(RESERVED_KERNEL_ARGS.map(str::to_owned))
        .collect();
    match args
        .split_whitespace()
        .find(|w| reserved.contains(&name(w)))
    {
        Some(word) => Err(format!(
            "`kernel_args` sets `{word}`, which Persim sets or relies on itself (its command \
             line: `{own}`): leave it out"
        )),
        None => Ok(()),
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
            blk_file: Some("/tmp/blk".into()),
            plugin: Some(Plugin {
                library: "/p.so".into(),
                args: PluginArgs::new(PM_BASE, 64 << 20, "/t,1".into()),
            }),
            snapshots: None,
            icount: false,
            kernel_args: String::new(),
            cpus: 1,
            qemu_version: "10.0.2".into(),
        };
        let args = spec.args();
        let joined = args.join(" ");
        assert!(joined.contains("-machine pc,nvdimm=on"), "{joined}");
        assert!(joined.contains("-nic none"));
        assert!(
            joined.contains("-rtc base=2026-01-01T00:00:00,clock=vm -seed 1"),
            "{joined}"
        );
        assert!(!joined.contains("-icount"), "{joined}");
        let counted = QemuSpec {
            icount: true,
            ..spec.clone()
        };
        assert!(counted.args().join(" ").contains(" -icount shift=3 "));
        assert!(joined.contains("-m 512M,slots=2,maxmem=2048M"), "{joined}");
        assert!(joined.contains("mem-path=/tmp/pm,size=67108864"));
        assert!(args.contains(
            &"/p.so,pm_base=0x100000000,pm_size=0x4000000,trace=/t,,1,reads=off,stacks=off,tracing=on,repeat=off"
                .to_owned()
        ));
        let append = args.iter().position(|a| a == "-append").unwrap();
        assert!(args[append + 1].split(' ').any(|w| w == KERNEL_NOKASLR));
        assert!(args[append + 1].ends_with(" nvme.sgl_threshold=0"));
        assert!(joined.contains(
            "-drive file=/tmp/blk,if=none,id=nvm,format=raw,cache=writeback,discard=unmap "
        ));
        assert!(joined.contains("-device nvme,serial=persim,drive=nvm,dbcs=off,write-cache=on,"));

        // A configuration's kernel_args come last, after Persim's own.
        let extra = QemuSpec {
            kernel_args: "nova.csum=1 foo=bar".into(),
            ..spec.clone()
        };
        let args = extra.args();
        let append = args.iter().position(|a| a == "-append").unwrap();
        assert!(
            args[append + 1].ends_with(" nvme.sgl_threshold=0 nova.csum=1 foo=bar"),
            "{}",
            args[append + 1]
        );
        assert_ne!(
            extra.snapshot_file("/c".as_ref()),
            spec.snapshot_file("/c".as_ref())
        );
    }

    #[test]
    fn a_kernel_rebuilt_at_the_same_path_has_another_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = dir.path().join("vmlinuz");
        std::fs::write(&kernel, b"kernel").unwrap();
        let spec = QemuSpec {
            kernel: kernel.clone(),
            initramfs: "/tmp/i.cpio".into(),
            memory_mib: 512,
            pm_file: "/tmp/pm".into(),
            pm_size: 64 << 20,
            blk_file: None,
            plugin: None,
            snapshots: None,
            icount: false,
            kernel_args: String::new(),
            cpus: 1,
            qemu_version: "10.0.2".into(),
        };
        let before = spec.snapshot_file(dir.path());
        assert_eq!(before, spec.snapshot_file(dir.path()), "the key is stable");
        let file = std::fs::File::options().write(true).open(&kernel).unwrap();
        let later = std::time::UNIX_EPOCH + std::time::Duration::from_secs(2_000_000_000);
        file.set_modified(later).unwrap();
        assert_ne!(before, spec.snapshot_file(dir.path()));
    }

    #[test]
    fn kernel_args_may_not_set_what_persim_sets_or_hold_control_characters() {
        assert_eq!(check_kernel_args("nova.csum=1 foo=bar quiet"), Ok(()));
        assert_eq!(check_kernel_args(""), Ok(()));
        for (args, word) in [
            ("nova.csum=1 console=tty0", "console=tty0"),
            ("nokaslr", "nokaslr"),
            ("kaslr", "kaslr"),
            ("no5lvl", "no5lvl"),
            ("panic=10", "panic=10"),
            ("init=/bin/sh", "init=/bin/sh"),
            ("rdinit=/sbin/init", "rdinit=/sbin/init"),
            ("memmap=2G!4G", "memmap=2G!4G"),
            ("no-timer-check", "no-timer-check"),
        ] {
            let e = check_kernel_args(args).unwrap_err();
            assert!(
                e.contains(&format!("`kernel_args` sets `{word}`")) && e.contains("leave it out"),
                "{args}: {e}"
            );
        }
        for bad in ["a=1\nb=2", "a=1\tb", "a\u{7}"] {
            let e = check_kernel_args(bad).unwrap_err();
            assert!(e.contains("control character"), "{bad:?}: {e}");
        }
    }
}
