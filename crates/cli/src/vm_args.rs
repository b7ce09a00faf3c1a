//! Command-line options shared by the commands that run the guest VM.

use anyhow::{bail, Result};
use clap::Args;
use persim_vm::{default_config_dir, Artifacts, VmConfig};
use std::path::PathBuf;
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
    /// Seconds each VM phase (boot, setup, run, shutdown) may take before the guest is
    /// killed and reported as hung.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub timeout: u64,
    /// Take the static guest tools (hypercall, fs-dump, ringbuf-tool) from DIR instead of
    /// this build's, e.g. a ringbuf-tool built with a mutant feature into another target
    /// directory (DIR = <target>/x86_64-unknown-linux-gnu/release).
    #[arg(long, value_name = "DIR")]
    pub guest_tools: Option<PathBuf>,
}

impl VmArgs {
    pub fn config(&self) -> Result<VmConfig> {
        Ok(match (&self.fs, &self.vm) {
            (_, Some(path)) => VmConfig::load(path)?,
            (Some(fs), None) => VmConfig::for_fs(&default_config_dir(), fs)?,
            (None, None) => bail!("say which file system to test: --fs ext4|xfs or --vm CONFIG"),
        })
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }

    /// The plugin and guest tools the VM is built from.
    pub fn artifacts(&self) -> Result<Artifacts> {
        let artifacts = Artifacts::locate()?;
        Ok(match &self.guest_tools {
            Some(dir) => artifacts.with_guest_tools_from(dir)?,
            None => artifacts,
        })
    }
}

/// Where built initramfs images and scratch PM files are kept: $PERSIM_CACHE, else
/// ~/.cache/persim.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PERSIM_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    home.join(".cache/persim")
}
