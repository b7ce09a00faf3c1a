//! VM configurations: one TOML file per file system or program under test (vm/*.toml), so
//! a user adds a configuration without touching code.

use crate::error::VmError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Keys whose values are paths, relative to the file that sets them.
const PATH_KEYS: [&str; 3] = ["kernel", "modules_dir", "system_map"];

/// Serialize: the tester's stage keys hash it (`origin`, only for messages, is left out).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    pub name: String,
    /// Guest RAM, not counting PM.
    pub memory_mib: u64,
    /// Size of the emulated NVDIMM.
    pub pm_size_mib: u64,
    /// Size of an emulated NVMe SSD (`/dev/nvme0n1`; 0: none), a worst-case device:
    /// volatile write cache, 512-byte blocks. Its commands are traced as block entries.
    #[serde(default)]
    pub nvme_size_mib: u64,
    /// Kernel modules (names as in modules.dep, `-` or `_` alike, or paths of `.ko` files:
    /// entries with a `/`, loaded after the named ones), loaded in this order
    /// after their dependencies.
    #[serde(default)]
    pub modules: Vec<String>,
    /// Programs copied into the initramfs with their shared libraries: a name (searched
    /// in the host's /usr/sbin, /sbin, /usr/bin, /bin) or a path (made absolute when the
    /// configuration is loaded), installed as /bin/<file name>.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Creates the file system on /dev/pmem0.
    pub mkfs: String,
    /// Mounts /dev/pmem0 on /mnt with DAX.
    pub mount: String,
    /// Mounts a crash image (runs the file system's recovery).
    pub recover: String,
    /// A kernel image to boot instead of the newest installed one.
    #[serde(default)]
    pub kernel: Option<PathBuf>,
    /// The `kernel`'s modules (the directory holding modules.dep); `None` when everything
    /// the guest needs is built in (then `modules` is empty).
    #[serde(default)]
    pub modules_dir: Option<PathBuf>,
    /// The `kernel`'s System.map.
    #[serde(default)]
    pub system_map: Option<PathBuf>,
    /// Names the state dump leaves out (fs-dump `--exclude`), e.g. `lost+found`.
    #[serde(default)]
    pub dump_exclude: Vec<String>,
    /// `persim faults --where data|metadata`: the function-name prefixes whose stores are
    /// data (a store with one of them in its stack); the rest is metadata. Empty: the
    /// kernel's DAX copy (`dax_`), right for a file system mounted with DAX
    /// (docs/guides/faults.md). Left out of the key when empty, as it changes no run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault_data_writers: Vec<String>,
    /// Kernel parameters appended to Persim's own command line, e.g. a file system's
    /// module parameter (`nova.csum=1`). Left out of the key when empty, so that
    /// configurations without it keep the keys of their runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_args: String,
    /// The file this configuration was read from (for messages), as given to
    /// [`VmConfig::load`] or [`VmConfig::parse`].
    #[serde(skip)]
    pub origin: PathBuf,
}

impl VmConfig {
    pub fn load(path: &Path) -> Result<VmConfig, VmError> {
        Self::parse(&read(path)?, path)
    }

    /// `origin` names the file in error messages; relative paths in the text (`extends`,
    /// `kernel`, `modules_dir`, `system_map`, `tools`) are relative to its directory.
    pub fn parse(text: &str, origin: &Path) -> Result<VmConfig, VmError> {
        let err = |message: String| VmError::Config {
            path: origin.to_owned(),
            message,
        };
        let mut chain = vec![identity(origin)];
        let table = merged_table(text, origin, &mut chain)?;
        // Through text, so that an error has a span: the merged file's line names the key.
        let merged = toml::to_string(&table).map_err(|e| err(e.to_string()))?;
        let mut config: VmConfig = toml::from_str(&merged).map_err(|e: toml::de::Error| {
            let mut message = e.message().trim_end().to_owned();
            if let Some(span) = e.span().filter(|s| s.start < merged.len()) {
                let start = merged[..span.start].rfind('\n').map_or(0, |i| i + 1);
                let end = merged[span.start..]
                    .find('\n')
                    .map_or(merged.len(), |i| span.start + i);
                message.push_str(&format!(" (in `{}`)", merged[start..end].trim()));
            }
            if chain.len() > 1 {
                let files: Vec<String> =
                    chain[1..].iter().map(|p| p.display().to_string()).collect();
                message.push_str(&format!(
                    " (in this file or the ones it extends: {})",
                    files.join(", ")
                ));
            }
            err(message)
        })?;
        config.origin = origin.to_owned();
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
        crate::qemu::check_kernel_args(&config.kernel_args).map_err(err)?;
        if config.kernel.is_none() {
            for (key, value) in [
                ("modules_dir", &config.modules_dir),
                ("system_map", &config.system_map),
            ] {
                if value.is_some() {
                    return Err(err(format!(
                        "`{key}` belongs to a custom kernel: set `kernel` too (or remove `{key}` \
                         to use the installed kernel)"
                    )));
                }
            }
        } else if config.modules_dir.is_none() && config.modules.iter().any(|m| !is_path(m)) {
            return Err(err(format!(
                "`modules` = {:?} but the `kernel` has no `modules_dir`: set it, or leave \
                 `modules` empty for a kernel with everything built in",
                config.modules
            )));
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

    /// The NVMe namespace's size in bytes (0: none).
    pub fn blk_size(&self) -> u64 {
        self.nvme_size_mib << 20
    }
}

fn read(path: &Path) -> Result<String, VmError> {
    std::fs::read_to_string(path).map_err(|e| VmError::Config {
        path: path.to_owned(),
        message: format!("cannot read it: {e}"),
    })
}

/// What makes two names of one file equal, for finding `extends` cycles.
fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// The keys of the file `origin` over those of the configurations it extends, with
/// path values made absolute. `chain` holds the files already on the way here.
fn merged_table(
    text: &str,
    origin: &Path,
    chain: &mut Vec<PathBuf>,
) -> Result<toml::Table, VmError> {
    let err = |message: String| VmError::Config {
        path: origin.to_owned(),
        message,
    };
    let mut table: toml::Table = toml::from_str(text).map_err(|e| err(e.to_string()))?;
    let dir = origin.parent().unwrap_or(Path::new(""));
    resolve_paths(&mut table, dir).map_err(err)?;
    let Some(extends) = table.remove("extends") else {
        return Ok(table);
    };
    let toml::Value::String(base) = extends else {
        return Err(err(
            "`extends` must be a string: a configuration name in the same directory or a \
             path"
                .to_owned(),
        ));
    };
    let base_path = base_path(dir, &base);
    let text = std::fs::read_to_string(&base_path).map_err(|e| {
        err(format!(
            "`extends` = \"{base}\": cannot read {}: {e}",
            base_path.display()
        ))
    })?;
    let id = identity(&base_path);
    if chain.contains(&id) {
        let cycle: Vec<String> = chain
            .iter()
            .chain([&id])
            .map(|p| p.display().to_string())
            .collect();
        return Err(err(format!(
            "`extends` = \"{base}\" makes a cycle: {}",
            cycle.join(" -> ")
        )));
    }
    chain.push(id);
    let mut merged = merged_table(&text, &base_path, chain)?;
    merged.extend(table);
    Ok(merged)
}

/// `extends = "NAME"` is NAME.toml next to the extending file; a value is a path relative
/// to that file's directory (`../other/base`), `.toml` added when it lacks it.
fn base_path(dir: &Path, base: &str) -> PathBuf {
    if base.ends_with(".toml") {
        dir.join(base)
    } else {
        dir.join(format!("{base}.toml"))
    }
}

/// Makes the path keys and the `tools` and `modules` that are paths (they contain a `/`) absolute,
/// relative to `dir`, the directory of the file that sets them.
fn resolve_paths(table: &mut toml::Table, dir: &Path) -> Result<(), String> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    // components() drops the `.` in `dir/./prog`
    let absolute = |value: &str| {
        let path: PathBuf = dir.join(value).components().collect();
        path.display().to_string()
    };
    for key in PATH_KEYS {
        if let Some(toml::Value::String(value)) = table.get_mut(key) {
            if value.is_empty() {
                return Err(format!("`{key}` must not be empty (leave it out instead)"));
            }
            *value = absolute(value);
        }
    }
    for key in ["tools", "modules"] {
        if let Some(toml::Value::Array(entries)) = table.get_mut(key) {
            for entry in entries {
                if let toml::Value::String(entry) = entry {
                    if is_path(entry) {
                        *entry = absolute(entry);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether a `tools` or `modules` entry is a path (it contains a `/`) rather than a name.
pub(crate) fn is_path(entry: &str) -> bool {
    entry.contains('/')
}

/// The vm/ directory of the source tree this crate was built from, for its own tests.
#[cfg(any(test, feature = "testing"))]
pub fn default_config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_configuration_parses() {
        for entry in std::fs::read_dir(default_config_dir()).unwrap() {
            let path = entry.unwrap().path();
            let config = VmConfig::load(&path).unwrap();
            assert_eq!(
                Some(config.name.as_str()),
                path.file_stem().and_then(|s| s.to_str())
            );
            assert_eq!(config.dump_exclude, ["lost+found"], "{}", path.display());
        }
        let custom = VmConfig::load(&default_config_dir().join("ext4-dax-6.12.toml")).unwrap();
        let base = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
        assert_eq!((&custom.mkfs, &custom.recover), (&base.mkfs, &base.recover));
        assert!(custom.kernel.unwrap().ends_with("6.12/vmlinuz"));
        assert!(base.kernel.is_none() && base.modules_dir.is_none());
    }

    /// Writes `files` (name, text) into a new directory.
    fn config_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    const BASE: &str = "name = \"base\"\nmemory_mib = 512\npm_size_mib = 64\n\
        modules = [\"ext4\", \"kmods/oops.ko\"]\ntools = [\"mkfs.ext4\", \"bin/check\"]\n\
        mkfs = \"mkfs\"\n\
        mount = \"mount\"\nrecover = \"recover\"\n";

    #[test]
    fn extends_takes_the_base_and_overrides_what_it_sets() {
        let dir = config_dir(&[
            ("base.toml", BASE),
            (
                "sub/mine.toml",
                "extends = \"../base.toml\"\nname = \"mine\"\nmemory_mib = 256\n\
                 dump_exclude = [\"lost+found\"]\n",
            ),
            ("sub/again.toml", "extends = \"mine\"\nrecover = \"fsck\"\n"),
        ]);
        let config = VmConfig::load(&dir.path().join("sub/again.toml")).unwrap();
        assert_eq!(
            (config.name.as_str(), config.memory_mib, config.pm_size_mib),
            ("mine", 256, 64)
        );
        assert_eq!(
            (config.mkfs.as_str(), config.recover.as_str()),
            ("mkfs", "fsck")
        );
        assert_eq!(config.dump_exclude, ["lost+found"]);
        assert_eq!(config.origin, dir.path().join("sub/again.toml"));
        // a program or module by path is relative to the file that names it, a name stays
        assert_eq!(config.tools[0], "mkfs.ext4");
        assert_eq!(
            config.modules,
            [
                "ext4".to_owned(),
                std::fs::canonicalize(dir.path())
                    .unwrap()
                    .join("kmods/oops.ko")
                    .display()
                    .to_string()
            ]
        );
        assert_eq!(
            Path::new(&config.tools[1]),
            std::fs::canonicalize(dir.path()).unwrap().join("bin/check")
        );
    }

    #[test]
    fn a_missing_base_or_a_cycle_is_an_error_naming_the_file() {
        let dir = config_dir(&[
            ("orphan.toml", "extends = \"nowhere\"\n"),
            ("a.toml", "extends = \"b\"\n"),
            ("b.toml", "extends = \"a.toml\"\n"),
            ("self.toml", "extends = \"self\"\n"),
        ]);
        let e = VmConfig::load(&dir.path().join("orphan.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("orphan.toml")
                && e.contains("`extends` = \"nowhere\"")
                && e.contains("nowhere.toml"),
            "{e}"
        );
        for (file, cycle) in [("a.toml", "a.toml -> "), ("self.toml", "self.toml -> ")] {
            let e = VmConfig::load(&dir.path().join(file))
                .unwrap_err()
                .to_string();
            assert!(e.contains("makes a cycle") && e.contains(cycle), "{e}");
        }
    }

    #[test]
    fn custom_kernel_paths_are_relative_to_the_file_and_checked() {
        let dir = config_dir(&[
            ("base.toml", BASE),
            (
                "k/custom.toml",
                "extends = \"../base\"\nkernel = \"bzImage\"\nmodules_dir = \"mods\"\n\
                 system_map = \"/nonexistent/System.map\"\n",
            ),
            ("k/bzImage", "kernel"),
            ("k/mods/modules.dep", ""),
        ]);
        let config = VmConfig::load(&dir.path().join("k/custom.toml")).unwrap();
        let k = std::fs::canonicalize(dir.path().join("k")).unwrap();
        assert_eq!(config.kernel.as_deref(), Some(k.join("bzImage").as_path()));
        assert_eq!(
            config.modules_dir.as_deref(),
            Some(k.join("mods").as_path())
        );
        let e = crate::Kernel::for_config(&config).unwrap_err().to_string();
        assert!(
            e.contains("custom.toml") && e.contains("`system_map` = /nonexistent"),
            "{e}"
        );
        let mut fixed = config.clone();
        fixed.system_map = None;
        let kernel = crate::Kernel::for_config(&fixed).unwrap();
        assert_eq!(kernel.image, k.join("bzImage"));
        fixed.modules_dir = Some(k.join("nomods"));
        let e = crate::Kernel::for_config(&fixed).unwrap_err().to_string();
        assert!(
            e.contains("custom.toml") && e.contains("`modules_dir` = ") && e.contains("nomods"),
            "{e}"
        );
        fixed.kernel = Some(k.join("vmlinuz"));
        let e = crate::Kernel::for_config(&fixed).unwrap_err().to_string();
        assert!(
            e.contains("`kernel` = ") && e.contains("no such kernel image"),
            "{e}"
        );
    }

    #[test]
    fn modules_need_a_modules_dir_and_kernel_keys_need_a_kernel() {
        let origin = Path::new("my.toml");
        let e = VmConfig::parse(&format!("{BASE}kernel = \"/boot/bzImage\"\n"), origin)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("my.toml") && e.contains("no `modules_dir`"),
            "{e}"
        );
        // modules of its own (paths) need no modules_dir
        let built_in = BASE.replace("\"ext4\", ", "");
        let config =
            VmConfig::parse(&format!("{built_in}kernel = \"/boot/bzImage\"\n"), origin).unwrap();
        assert!(config.modules_dir.is_none());
        assert_eq!(config.modules.len(), 1);
        let e = VmConfig::parse(&format!("{BASE}modules_dir = \"/lib/modules/x\"\n"), origin)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`modules_dir` belongs to a custom kernel"),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_and_bad_size_are_reported_with_the_file_name() {
        let origin = Path::new("my.toml");
        let good = std::fs::read_to_string(default_config_dir().join("ext4-dax.toml")).unwrap();
        let typo = good.replace("pm_size_mib", "pm_sise_mib");
        let e = VmConfig::parse(&typo, origin).unwrap_err().to_string();
        assert!(e.contains("my.toml") && e.contains("pm_sise_mib"), "{e}");
        let e = VmConfig::parse("name = \"x\"\nmemory_mib = \"lots\"\n", origin)
            .unwrap_err()
            .to_string();
        assert!(e.contains("my.toml") && e.contains("memory_mib"), "{e}");
        let odd = good.replace("pm_size_mib = 64", "pm_size_mib = 3");
        let e = VmConfig::parse(&odd, origin).unwrap_err().to_string();
        assert!(e.contains("multiple of 2"), "{e}");
    }

    #[test]
    fn kernel_args_are_extended_checked_and_keyed_only_when_set() {
        let dir = config_dir(&[
            (
                "base.toml",
                &format!("{BASE}kernel_args = \"nova.csum=1 foo=bar\"\n"),
            ),
            ("mine.toml", "extends = \"base\"\nname = \"mine\"\n"),
            ("other.toml", "extends = \"base\"\nkernel_args = \"x=2\"\n"),
            (
                "bad.toml",
                "extends = \"base\"\nkernel_args = \"x=1 nokaslr\"\n",
            ),
            ("list.toml", "extends = \"base\"\nkernel_args = [\"x=1\"]\n"),
        ]);
        let load = |name: &str| VmConfig::load(&dir.path().join(name));
        assert_eq!(
            load("mine.toml").unwrap().kernel_args,
            "nova.csum=1 foo=bar"
        );
        assert_eq!(load("other.toml").unwrap().kernel_args, "x=2");
        let e = load("bad.toml").unwrap_err().to_string();
        assert!(
            e.contains("bad.toml") && e.contains("`kernel_args` sets `nokaslr`"),
            "{e}"
        );
        let e = load("list.toml").unwrap_err().to_string();
        assert!(e.contains("list.toml") && e.contains("kernel_args"), "{e}");

        // In the machine's key when set, and absent (old keys kept) when not.
        let json = |config: &VmConfig| serde_json::to_string(config).unwrap();
        assert!(
            json(&load("mine.toml").unwrap()).contains(r#""kernel_args":"nova.csum=1 foo=bar""#)
        );
        let plain = VmConfig::parse(BASE, Path::new("/vm/base.toml")).unwrap();
        assert!(!json(&plain).contains("kernel_args"));
    }

    #[test]
    fn missing_fs_configuration_names_the_option() {
        let e = VmConfig::for_fs(&default_config_dir(), "btrfs")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--vm CONFIG"), "{e}");
    }
}
