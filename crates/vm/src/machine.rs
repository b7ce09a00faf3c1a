//! The machine description: everything about the guest VM that recording and extraction
//! share (configuration, artifacts, timeouts, cache directory, jobs). Both take it whole,
//! with only their own per-call choices beside it.

use crate::boot::Artifacts;
use crate::config::VmConfig;
use std::path::PathBuf;
use std::time::Duration;

/// How the guest VM runs.
#[derive(Clone, Debug)]
pub struct Machine {
    pub config: VmConfig,
    /// The plugin and static guest tools the VM is built from.
    pub artifacts: Artifacts,
    /// Limit of each VM phase (boot, setup, traced run, shutdown) and of each image's
    /// recovery; beyond it the guest is killed and reported as hung.
    pub timeout: Duration,
    /// Limit of booting a guest (for tracing, and each extraction worker's).
    pub boot_timeout: Duration,
    /// Initramfs cache and scratch PM files.
    pub cache_dir: PathBuf,
    /// Crash images recovered in parallel (one VM each).
    pub jobs: usize,
    /// The VM phases' progress on stderr.
    pub progress: bool,
}

impl Machine {
    /// Where built initramfs images, booted snapshots and scratch PM files are kept:
    /// $PERSIM_CACHE, else ~/.cache/persim.
    pub fn default_cache_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("PERSIM_CACHE") {
            return PathBuf::from(dir);
        }
        let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
        home.join(".cache/persim")
    }
}
