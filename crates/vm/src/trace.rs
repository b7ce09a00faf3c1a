//! `persim trace`: boot the configured VM with the tracing plugin, set up the file system,
//! run the user's commands between `hypercall start` and `hypercall success|fail`.

use crate::config::VmConfig;
use crate::console::Vm;
use crate::error::VmError;
use crate::initramfs::{build_cached, InitramfsSpec};
use crate::kernel::Kernel;
use crate::qemu::{check_version, Plugin, QemuSpec, MAX_MEMORY_MIB, PM_BASE};
use persim_trace::initial_image_path;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";
const GUEST_TOOLS: [&str; 3] = ["hypercall", "fs-dump", "ringbuf-tool"];
const PLUGIN_FILE: &str = "libpersim_plugin.so";
const BUILD_HINT: &str =
    "build them with `scripts/setup.sh` (or: cargo build --release -p persim-plugin && \
     cargo build --release -p persim-guest --target x86_64-unknown-linux-gnu \
     --config 'target.x86_64-unknown-linux-gnu.rustflags=[\"-C\",\"target-feature=+crt-static\",\"-C\",\"force-frame-pointers=yes\"]')";

/// Files built from this workspace that the VM needs.
#[derive(Clone, Debug)]
pub struct Artifacts {
    pub plugin: PathBuf,
    /// Static guest binaries, installed as /bin/<name> in the guest.
    pub guest_tools: Vec<PathBuf>,
    pub busybox: PathBuf,
}

impl Artifacts {
    /// Finds the plugin and guest tools in the Cargo target directory that holds the
    /// running executable (or the one of this source tree).
    pub fn locate() -> Result<Artifacts, VmError> {
        let mut roots: Vec<PathBuf> = std::env::current_exe()
            .ok()
            .map(|exe| exe.ancestors().skip(1).map(Path::to_owned).collect())
            .unwrap_or_default();
        roots.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
        let find = |relative: &[String]| -> Option<PathBuf> {
            roots
                .iter()
                .flat_map(|root| relative.iter().map(move |r| root.join(r)))
                .find(|p| p.is_file())
        };
        let missing = |what: String| VmError::Missing {
            what,
            hint: BUILD_HINT.to_owned(),
        };
        let plugin = find(&[
            format!("release/{PLUGIN_FILE}"),
            format!("debug/{PLUGIN_FILE}"),
        ])
        .ok_or_else(|| missing(format!("the tracing plugin {PLUGIN_FILE}")))?;
        let guest_tools = guest_tools(|tool| find(&[format!("{GUEST_TARGET}/release/{tool}")]))
            .map_err(|tool| missing(format!("the static guest tool `{tool}`")))?;
        Ok(Artifacts {
            plugin,
            guest_tools,
            busybox: PathBuf::from("/bin/busybox"),
        })
    }

    /// Takes the guest tools from `dir` instead, e.g. a build with other features in
    /// another target directory (`<target>/x86_64-unknown-linux-gnu/release`).
    pub fn with_guest_tools_from(mut self, dir: &Path) -> Result<Artifacts, VmError> {
        self.guest_tools = guest_tools(|tool| Some(dir.join(tool)).filter(|p| p.is_file()))
            .map_err(|tool| VmError::Missing {
                what: format!("the static guest tool `{tool}` in {}", dir.display()),
                hint: BUILD_HINT.to_owned(),
            })?;
        Ok(self)
    }
}

/// Every guest tool's path as `find` gives it, or the name of the first it cannot find.
fn guest_tools(find: impl Fn(&str) -> Option<PathBuf>) -> Result<Vec<PathBuf>, &'static str> {
    GUEST_TOOLS
        .iter()
        .map(|&tool| find(tool).ok_or(tool))
        .collect()
}

/// A kernel and initramfs ready to boot for one configuration.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub kernel: Kernel,
    pub initramfs: PathBuf,
    pub qemu_version: String,
}

pub fn prepare(
    config: &VmConfig,
    artifacts: &Artifacts,
    cache_dir: &Path,
) -> Result<Prepared, VmError> {
    let qemu_version = check_version()?;
    if config.memory_mib > MAX_MEMORY_MIB {
        return Err(VmError::Config {
            path: PathBuf::from(&config.name),
            message: format!(
                "memory_mib must be at most {MAX_MEMORY_MIB} (RAM must stay below 4 GiB)"
            ),
        });
    }
    let kernel = Kernel::find_installed()?;
    let spec = InitramfsSpec {
        kernel: &kernel,
        modules: &config.modules,
        tools: &config.tools,
        guest_tools: &artifacts.guest_tools,
        busybox: &artifacts.busybox,
    };
    let initramfs = build_cached(&spec, cache_dir)?;
    Ok(Prepared {
        kernel,
        initramfs,
        qemu_version,
    })
}

#[derive(Clone, Debug)]
pub struct TraceOptions {
    pub config: VmConfig,
    /// Shell commands run in the guest, in /mnt, between `hypercall start` and
    /// `hypercall success` (exit code 0) or `hypercall fail`.
    pub command: String,
    /// Shell commands run after mount, before tracing starts (e.g. to create files the
    /// traced commands work on; end with `sync` to make them durable).
    pub setup: String,
    /// The trace; the PM contents at `hypercall start` go next to it
    /// (`persim_trace::initial_image_path`).
    pub output: PathBuf,
    pub reads: bool,
    pub stack_traces: bool,
    /// Limit for each phase (boot, setup, traced run, shutdown).
    pub timeout: Duration,
    /// Initramfs cache and scratch PM files.
    pub cache_dir: PathBuf,
    pub artifacts: Artifacts,
    /// Print phases and their timings to stderr.
    pub progress: bool,
}

#[derive(Clone, Debug)]
pub struct TraceSummary {
    /// Exit code of the traced commands.
    pub exit_code: i32,
    pub output: String,
    pub kernel_errors: Vec<String>,
    pub pm_base: u64,
    pub pm_size: u64,
    pub boot: Duration,
    pub setup: Duration,
    pub traced: Duration,
    pub shutdown: Duration,
}

pub fn trace(opts: &TraceOptions) -> Result<TraceSummary, VmError> {
    let say = |text: String| {
        if opts.progress {
            eprintln!("persim trace: {text}");
        }
    };
    let prepared = prepare(&opts.config, &opts.artifacts, &opts.cache_dir)?;
    let pm = ScratchFile::create(&opts.cache_dir, opts.config.pm_size())?;
    let pm_size = opts.config.pm_size();
    let on_off = |b: bool| if b { "on" } else { "off" };
    let spec = QemuSpec {
        kernel: prepared.kernel.image.clone(),
        initramfs: prepared.initramfs.clone(),
        memory_mib: opts.config.memory_mib,
        pm_file: pm.0.clone(),
        pm_size,
        plugin: Some(Plugin {
            library: opts.artifacts.plugin.clone(),
            args: vec![
                format!("pm_base={PM_BASE}"),
                format!("pm_size={pm_size}"),
                format!("trace={}", opts.output.display()),
                format!("pm_file={}", pm.0.display()),
                format!("initial={}", initial_image_path(&opts.output).display()),
                format!("reads={}", on_off(opts.reads)),
                format!("stacks={}", on_off(opts.stack_traces)),
            ],
        }),
    };

    say(format!(
        "booting {} (QEMU {}, kernel {})",
        opts.config.name,
        prepared.qemu_version,
        prepared.kernel.image.display()
    ));
    let started = Instant::now();
    let mut vm = Vm::boot(&spec, opts.timeout)?;
    let boot = started.elapsed();
    say(format!("boot {:.2} s", boot.as_secs_f64()));

    let started = Instant::now();
    check_pm_range(&mut vm, pm_size, opts.timeout)?;
    let setup_commands = [&opts.config.mkfs, &opts.config.mount, &opts.setup];
    for command in setup_commands.into_iter().filter(|c| !c.trim().is_empty()) {
        let out = vm.run(command, opts.timeout)?;
        if out.exit_code != 0 {
            return Err(VmError::SetupFailed {
                command: command.clone(),
                exit_code: out.exit_code,
                output: out.output,
            });
        }
    }
    let setup = started.elapsed();
    say(format!("setup {:.2} s", setup.as_secs_f64()));

    let started = Instant::now();
    let script = format!(
        "cd /mnt\nhypercall start\n(\n{}\n)\nrc=$?\nif [ $rc -eq 0 ]; then hypercall success; else hypercall fail; fi\nexit $rc\n",
        opts.command
    );
    let out = vm.run(&script, opts.timeout)?;
    let traced = started.elapsed();
    say(format!(
        "traced run {:.2} s (exit code {})",
        traced.as_secs_f64(),
        out.exit_code
    ));

    let started = Instant::now();
    vm.shutdown(opts.timeout)?;
    let shutdown = started.elapsed();
    say(format!("shutdown {:.2} s", shutdown.as_secs_f64()));
    Ok(TraceSummary {
        exit_code: out.exit_code,
        output: out.output,
        kernel_errors: out.kernel_errors,
        pm_base: PM_BASE,
        pm_size,
        boot,
        setup,
        traced,
        shutdown,
    })
}

/// The plugin is told where PM is from the machine layout; the guest kernel's view of the
/// NVDIMM region (from the NFIT) must agree, or the trace would record the wrong memory.
fn check_pm_range(vm: &mut Vm, pm_size: u64, timeout: Duration) -> Result<(), VmError> {
    let out = vm.run(
        "cat /sys/bus/nd/devices/region0/resource /sys/bus/nd/devices/region0/size",
        timeout,
    )?;
    let mut values = out.output.lines().filter_map(|l| {
        let l = l.trim();
        match l.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => l.parse().ok(),
        }
    });
    match (values.next(), values.next()) {
        (Some(base), Some(size)) if base == PM_BASE && size == pm_size => Ok(()),
        (Some(base), Some(size)) => Err(VmError::Protocol(format!(
            "the guest sees the NVDIMM at {base:#x} (+{size:#x}), expected {PM_BASE:#x} (+{pm_size:#x})"
        ))),
        _ => Err(VmError::Protocol(format!("the guest has no NVDIMM region: {}", out.output))),
    }
}

/// A sparse host file backing the NVDIMM, removed when dropped.
struct ScratchFile(PathBuf);

impl ScratchFile {
    fn create(dir: &Path, size: u64) -> Result<ScratchFile, VmError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| VmError::io(format!("creating {}", dir.display()), e))?;
        // unique per process and per call: tests trace in parallel within one process
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("pm-{}-{n}.img", std::process::id()));
        let file = std::fs::File::create(&path)
            .map_err(|e| VmError::io(format!("creating {}", path.display()), e))?;
        file.set_len(size)
            .map_err(|e| VmError::io(format!("sizing {}", path.display()), e))?;
        Ok(ScratchFile(path))
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
