//! VM configurations: one TOML file per file system or program under test (vm/*.toml), so
//! a user adds a configuration without touching code.

use crate::error::VmError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    pub name: String,
    /// Guest RAM, not counting PM.
    pub memory_mib: u64,
    /// Size of the emulated NVDIMM.
    pub pm_size_mib: u64,
    /// Kernel modules (names as in modules.dep, `-` or `_` alike), loaded in this order
    /// after their dependencies.
    pub modules: Vec<String>,
    /// Programs copied into the initramfs with their shared libraries.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Creates the file system on /dev/pmem0.
    pub mkfs: String,
    /// Mounts /dev/pmem0 on /mnt with DAX.
    pub mount: String,
    /// Mounts a crash image (runs the file system's recovery).
    pub recover: String,
}

impl VmConfig {
    pub fn load(path: &Path) -> Result<VmConfig, VmError> {
        let text = std::fs::read_to_string(path).map_err(|e| VmError::Config {
            path: path.to_owned(),
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// `origin` names the file in error messages.
    pub fn parse(text: &str, origin: &Path) -> Result<VmConfig, VmError> {
        let err = |message: String| VmError::Config {
            path: origin.to_owned(),
            message,
        };
        let config: VmConfig = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        if config.memory_mib < 128 {
            return Err(err(format!(
                "memory_mib = {} is too small (at least 128)",
                config.memory_mib
            )));
        }
        if config.pm_size_mib == 0 || config.pm_size_mib & 1 != 0 {
            return Err(err(format!(
                "pm_size_mib = {} must be a positive multiple of 2 (NVDIMM alignment)",
                config.pm_size_mib
            )));
        }
        for (key, value) in [
            ("mkfs", &config.mkfs),
            ("mount", &config.mount),
            ("recover", &config.recover),
        ] {
            if value.trim().is_empty() {
                return Err(err(format!("`{key}` must not be empty")));
            }
        }
        Ok(config)
    }

    /// The configuration for a file system name (`ext4`, `xfs`), from `config_dir`.
    pub fn for_fs(config_dir: &Path, fs: &str) -> Result<VmConfig, VmError> {
        let path = config_dir.join(format!("{fs}-dax.toml"));
        if !path.exists() {
            return Err(VmError::Config {
                path,
                message: format!(
                    "no configuration for file system `{fs}`; pass one with --vm CONFIG"
                ),
            });
        }
        Self::load(&path)
    }

    pub fn pm_size(&self) -> u64 {
        self.pm_size_mib << 20
    }
}

/// The vm/ directory of the source tree this crate was built from.
pub fn default_config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_configurations_parse() {
        for fs in ["ext4", "xfs"] {
            let config = VmConfig::for_fs(&default_config_dir(), fs).unwrap();
            assert_eq!(config.name, format!("{fs}-dax"));
            assert!(config.mount.contains("-o dax"), "{fs}: {}", config.mount);
            assert!(config.modules.iter().any(|m| m == fs));
        }
    }

    #[test]
    fn unknown_key_and_bad_size_are_reported_with_the_file_name() {
        let origin = Path::new("my.toml");
        let good = std::fs::read_to_string(default_config_dir().join("ext4-dax.toml")).unwrap();
        let typo = good.replace("pm_size_mib", "pm_sise_mib");
        let e = VmConfig::parse(&typo, origin).unwrap_err().to_string();
        assert!(e.contains("my.toml") && e.contains("pm_sise_mib"), "{e}");
        let odd = good.replace("pm_size_mib = 64", "pm_size_mib = 3");
        let e = VmConfig::parse(&odd, origin).unwrap_err().to_string();
        assert!(e.contains("multiple of 2"), "{e}");
    }

    #[test]
    fn missing_fs_configuration_names_the_option() {
        let e = VmConfig::for_fs(&default_config_dir(), "btrfs")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--vm CONFIG"), "{e}");
    }
}
