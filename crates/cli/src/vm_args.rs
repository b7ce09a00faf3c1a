//! Command-line options shared by the commands that run the guest VM.

use anyhow::{bail, Context, Result};
use clap::Args;
use persim_tester::Home;
use persim_vm::{Machine, VmConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct VmArgs {
    /// File system under test: its configuration is vm/<FS>-dax.toml (ext4, xfs).
    #[arg(long, conflicts_with = "vm")]
    pub fs: Option<String>,
    /// A VM configuration file (PM size, modules, mkfs, mount and recovery commands), for
    /// another file system or program.
    #[arg(long, value_name = "CONFIG")]
    pub vm: Option<PathBuf>,
    /// Seconds each VM phase may take before the guest is killed and reported as hung:
    /// setting up, the traced run and shutting down; and, in state extraction, recovering
    /// and dumping one image (a hang there is a result, `hang`).
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub timeout: u64,
    /// Seconds a guest may take to boot (under TCG on a loaded machine, tens of seconds).
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub boot_timeout: u64,
    /// Take the static guest tools (hypercall, fs-dump, fs-ops, fw-cfg, stay-busy,
    /// user-maps, ringbuf-tool) from DIR instead of this build's, e.g. a ringbuf-tool built with a
    /// mutant feature into another target directory (DIR =
    /// <target>/x86_64-unknown-linux-gnu/release).
    #[arg(long, value_name = "DIR")]
    pub guest_tools: Option<PathBuf>,
    /// Where Persim's suites, VM configurations, plugin and guest tools are: a source tree
    /// or an installation's share/persim. Default: $PERSIM_HOME, else next to this
    /// executable (an installation, or the source tree it was built in).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

impl VmArgs {
    pub fn home(&self) -> Result<Home> {
        Home::locate(self.home.as_deref())
    }

    /// The configuration of --fs/--vm, and the file it came from if --vm named one.
    fn config(&self, home: &Home) -> Result<(VmConfig, Option<PathBuf>)> {
        Ok(match (&self.fs, &self.vm) {
            (_, Some(path)) => (VmConfig::load(path)?, Some(absolute(path))),
            (Some(fs), None) => (VmConfig::for_fs(&home.vm_configs(), fs)?, None),
            (None, None) => bail!("say which file system to test: --fs ext4|xfs or --vm CONFIG"),
        })
    }

    /// The VM; `jobs`: images recovered in parallel (default: the cores).
    pub fn machine(&self, jobs: Option<usize>, progress: bool) -> Result<Machine> {
        let home = self.home()?;
        let config = self.config(&home)?;
        self.machine_of(&home, config, jobs, progress)
    }

    /// The VM a run directory's states were recovered on: --fs/--vm if given (its name
    /// must be the run's), else the configuration file the run recorded (`run_file`), else
    /// the configuration of the run's machine's name among Persim's.
    pub fn machine_of_run(
        &self,
        run_machine: &str,
        run_file: Option<&Path>,
        jobs: Option<usize>,
        progress: bool,
    ) -> Result<Machine> {
        let home = self.home()?;
        let config = match (&self.fs, &self.vm, run_file) {
            (None, None, Some(file)) => (
                VmConfig::load(file).with_context(|| {
                    format!(
                        "the run was made with {}: give its configuration with --vm CONFIG",
                        file.display()
                    )
                })?,
                Some(file.to_path_buf()),
            ),
            (None, None, None) => (
                VmConfig::load(&home.vm_configs().join(format!("{run_machine}.toml")))
                    .with_context(|| {
                        format!(
                            "the run was made on `{run_machine}`: give its configuration with \
                             --vm CONFIG"
                        )
                    })?,
                None,
            ),
            _ => self.config(&home)?,
        };
        if config.0.name != run_machine {
            bail!(
                "the run was made on `{run_machine}`, not `{}`: give the configuration it ran \
                 with (--vm CONFIG), or leave out --fs/--vm",
                config.0.name
            );
        }
        self.machine_of(&home, config, jobs, progress)
    }

    /// The VM of `--reference CONFIG`: a configuration file, or a file system's name as
    /// `--fs` takes it; the same tools, timeouts and cache as the tested one, and one
    /// recovery at a time (it recovers one image per checkpoint).
    pub fn reference_machine(&self, reference: &str, progress: bool) -> Result<Machine> {
        let home = self.home()?;
        let path = Path::new(reference);
        let config = if path.is_file() || reference.ends_with(".toml") {
            VmConfig::load(path)
        } else {
            VmConfig::for_fs(&home.vm_configs(), reference)
        }
        .with_context(|| {
            format!(
                "--reference {reference}: give a file system as --fs takes it (ext4, xfs) or a \
                 VM configuration file"
            )
        })?;
        let file = path.is_file().then(|| absolute(path));
        self.machine_of(&home, (config, file), Some(1), progress)
    }

    fn machine_of(
        &self,
        home: &Home,
        (config, config_file): (VmConfig, Option<PathBuf>),
        jobs: Option<usize>,
        progress: bool,
    ) -> Result<Machine> {
        let artifacts = home.artifacts()?;
        let artifacts = match &self.guest_tools {
            Some(dir) => artifacts.with_guest_tools_from(dir)?,
            None => artifacts,
        };
        Ok(Machine {
            config,
            config_file,
            artifacts,
            timeout: Duration::from_secs(self.timeout),
            boot_timeout: Duration::from_secs(self.boot_timeout),
            cache_dir: Machine::default_cache_dir(),
            jobs: jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            progress,
        })
    }
}

/// `path` from the root, so that a run directory's record of it holds from anywhere.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
