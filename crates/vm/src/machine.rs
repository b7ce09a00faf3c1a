//! The machine description: everything about the guest VM that recording and extraction
//! share (configuration, artifacts, timeouts, cache directory, jobs). Both take it whole,
//! with only their own per-call choices beside it.

use crate::boot::Artifacts;
use crate::config::VmConfig;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// How the guest VM runs.
#[derive(Clone, Debug)]
pub struct Machine {
    pub config: VmConfig,
    /// The file `config` was loaded from, if one was named (absolute).
    pub config_file: Option<PathBuf>,
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
    /// $PERSIM_CACHE, else $XDG_CACHE_HOME/persim, else ~/.cache/persim.
    pub fn default_cache_dir() -> PathBuf {
        let var = std::env::var_os;
        cache_dir_in(var("PERSIM_CACHE"), var("XDG_CACHE_HOME"), || {
            var("HOME").map_or_else(std::env::temp_dir, PathBuf::from)
        })
    }
}

/// [`Machine::default_cache_dir`] from the values of PERSIM_CACHE, XDG_CACHE_HOME and the
/// home directory. The XDG base directory spec ignores a relative or empty
/// XDG_CACHE_HOME.
fn cache_dir_in(
    persim_cache: Option<OsString>,
    xdg_cache_home: Option<OsString>,
    home: impl FnOnce() -> PathBuf,
) -> PathBuf {
    if let Some(dir) = persim_cache {
        return PathBuf::from(dir);
    }
    match xdg_cache_home.map(PathBuf::from) {
        Some(xdg) if xdg.is_absolute() => xdg.join("persim"),
        _ => home().join(".cache/persim"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> PathBuf {
        PathBuf::from("/home/u")
    }

    #[test]
    fn the_cache_is_persim_cache_else_under_xdg_cache_home_else_under_home() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            cache_dir_in(some("/c"), some("/x"), home),
            PathBuf::from("/c")
        );
        assert_eq!(
            cache_dir_in(None, some("/x/cache"), home),
            PathBuf::from("/x/cache/persim")
        );
        assert_eq!(
            cache_dir_in(None, None, home),
            PathBuf::from("/home/u/.cache/persim")
        );
        // Empty or relative: not set, as the XDG spec says.
        for ignored in ["", "cache"] {
            assert_eq!(
                cache_dir_in(None, some(ignored), home),
                PathBuf::from("/home/u/.cache/persim"),
                "{ignored:?}"
            );
        }
    }
}
