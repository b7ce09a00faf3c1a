//! Boot preparation: the files a guest boots from (the configuration's kernel and an
//! initramfs built from the workspace's artifacts), shared by recording and extraction.

use crate::config::VmConfig;
use crate::error::VmError;
use crate::initramfs::{build_cached, host_files, InitramfsSpec};
use crate::kernel::Kernel;
use crate::qemu::{check_version, QemuSpec, MAX_MEMORY_MIB};
use std::path::{Path, PathBuf};

/// Persim's own guest tools (package persim-guest) and the ring buffer's (persim-subjects),
/// all built into one target directory by `cargo guest-tools` (.cargo/config.toml).
const GUEST_TOOLS: [&str; 7] = [
    "hypercall",
    "fs-dump",
    "fs-ops",
    "fw-cfg",
    "stay-busy",
    "user-maps",
    "ringbuf-tool",
];
const PLUGIN_FILE: &str = "libpersim_plugin.so";
const BUILD_HINT: &str = "build them with `scripts/setup.sh` (or: cargo build --release -p \
     persim-plugin && cargo guest-tools)";

/// Files built from this workspace that the VM needs.
#[derive(Clone, Debug)]
pub struct Artifacts {
    pub plugin: PathBuf,
    /// Static guest binaries, installed as /bin/<name> in the guest.
    pub guest_tools: Vec<PathBuf>,
    pub busybox: PathBuf,
}

impl Artifacts {
    /// The plugin `PLUGIN_DIR/libpersim_plugin.so` and the guest tools in `guest_dir`
    /// (where a source tree or an installation keeps them: `persim_tester::Home`).
    pub fn from_dirs(plugin_dir: &Path, guest_dir: &Path) -> Result<Artifacts, VmError> {
        let plugin = plugin_dir.join(PLUGIN_FILE);
        if !plugin.is_file() {
            return Err(VmError::Missing {
                what: format!("the tracing plugin {}", plugin.display()),
                hint: BUILD_HINT.to_owned(),
            });
        }
        Artifacts {
            plugin,
            guest_tools: Vec::new(),
            busybox: PathBuf::from("/bin/busybox"),
        }
        .with_guest_tools_from(guest_dir)
    }

    /// This source tree's build, for the crate's own tests.
    #[cfg(any(test, feature = "testing"))]
    pub fn of_source_tree() -> Result<Artifacts, VmError> {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
        Self::from_dirs(
            &target.join("release"),
            &target.join("x86_64-unknown-linux-gnu/release"),
        )
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
    /// Guest path -> host file, where they differ (`initramfs::host_files`).
    pub host_files: std::collections::BTreeMap<String, PathBuf>,
}

impl Prepared {
    /// A guest of `config` booting these files, on `pm_file`, without the plugin.
    pub fn qemu_spec(&self, config: &VmConfig, pm_file: PathBuf) -> QemuSpec {
        QemuSpec {
            kernel: self.kernel.image.clone(),
            initramfs: self.initramfs.clone(),
            memory_mib: config.memory_mib,
            pm_file,
            pm_size: config.pm_size(),
            blk_file: None,
            plugin: None,
            snapshots: None,
            icount: false,
            kernel_args: config.kernel_args.clone(),
            cpus: 1,
            qemu_version: self.qemu_version.clone(),
        }
    }
}

/// Checks QEMU and the configuration's memory size, finds its kernel and builds (or takes
/// from `cache_dir`) the initramfs with `artifacts`' guest tools.
pub fn prepare(
    config: &VmConfig,
    artifacts: &Artifacts,
    cache_dir: &Path,
) -> Result<Prepared, VmError> {
    let qemu_version = check_version()?;
    if config.memory_mib > MAX_MEMORY_MIB {
        return Err(VmError::Config {
            path: config.origin.clone(),
            message: format!(
                "memory_mib must be at most {MAX_MEMORY_MIB} (RAM must stay below 4 GiB)"
            ),
        });
    }
    let kernel = Kernel::for_config(config)?;
    let spec = InitramfsSpec {
        kernel: &kernel,
        modules: &config.modules,
        tools: &config.tools,
        guest_tools: &artifacts.guest_tools,
        busybox: &artifacts.busybox,
    };
    let initramfs = build_cached(&spec, cache_dir)?;
    let host_files = host_files(&spec)?;
    Ok(Prepared {
        kernel,
        initramfs,
        qemu_version,
        host_files,
    })
}
