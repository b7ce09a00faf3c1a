//! The guest kernel and its modules: the installed Debian kernel, or the one a VM
//! configuration names (`kernel`, `modules_dir`, `system_map`).

use crate::config::VmConfig;
use crate::error::VmError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Kernel {
    pub image: PathBuf,
    /// /lib/modules/<release>; `None` for a kernel with everything built in.
    pub modules_dir: Option<PathBuf>,
    /// The kernel's symbol table, when known (/boot/System.map-<release>).
    pub system_map: Option<PathBuf>,
}

/// In a `modules` path, the guest kernel's release: a configuration names the module
/// built for whichever kernel it boots (docs/reference/vm-config.md).
pub const RELEASE_PLACEHOLDER: &str = "{release}";

const SETUP_HINT: &str =
    "install it with `sudo scripts/setup.sh` (Debian package linux-image-amd64)";

impl Kernel {
    /// The kernel `config` names, checked to exist, or else the installed one
    /// ([`Kernel::find_installed`]).
    pub fn for_config(config: &VmConfig) -> Result<Kernel, VmError> {
        let Some(image) = &config.kernel else {
            return Self::find_installed();
        };
        let err = |key: &str, path: &Path, what: &str| VmError::Config {
            path: config.origin.clone(),
            message: format!("`{key}` = {}: {what}", path.display()),
        };
        if !image.is_file() {
            return Err(err("kernel", image, "no such kernel image"));
        }
        if let Some(dir) = &config.modules_dir {
            if !dir.join("modules.dep").is_file() {
                return Err(err(
                    "modules_dir",
                    dir,
                    "not a modules directory (it has no modules.dep)",
                ));
            }
        }
        if let Some(map) = &config.system_map {
            if !map.is_file() {
                return Err(err("system_map", map, "no such file"));
            }
        }
        Ok(Kernel {
            image: image.clone(),
            modules_dir: config.modules_dir.clone(),
            system_map: config.system_map.clone(),
        })
    }

    /// The newest /boot/vmlinuz-* that has a matching /lib/modules directory.
    pub fn find_installed() -> Result<Kernel, VmError> {
        Self::find_in(Path::new("/boot"), Path::new("/lib/modules"))
    }

    pub fn find_in(boot: &Path, modules_root: &Path) -> Result<Kernel, VmError> {
        let missing = || VmError::Missing {
            what: format!(
                "a guest kernel ({}/vmlinuz-* with {}/<release>)",
                boot.display(),
                modules_root.display()
            ),
            hint: SETUP_HINT.to_owned(),
        };
        let entries = std::fs::read_dir(boot).map_err(|_| missing())?;
        let mut releases: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|name| name.strip_prefix("vmlinuz-").map(str::to_owned))
            .filter(|release| modules_root.join(release).join("modules.dep").is_file())
            .collect();
        releases.sort_by_key(|release| version_key(release));
        let release = releases.pop().ok_or_else(missing)?;
        let system_map = boot.join(format!("System.map-{release}"));
        Ok(Kernel {
            image: boot.join(format!("vmlinuz-{release}")),
            modules_dir: Some(modules_root.join(&release)),
            system_map: system_map.is_file().then_some(system_map),
        })
    }

    /// The kernel's release, the name of its modules directory (through a symbolic link,
    /// as /var/lib/persim/kernels/6.12/modules is one); `None` without modules.
    pub fn release(&self) -> Option<String> {
        let dir = self.modules_dir.as_deref()?;
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        Some(dir.file_name()?.to_string_lossy().into_owned())
    }

    /// Module files for `modules` and all their dependencies, dependencies first, each
    /// once; entries that are paths (`.ko` files of your own) follow, in their order,
    /// with [`RELEASE_PLACEHOLDER`] replaced by the kernel's release.
    pub fn resolve_modules(&self, modules: &[String]) -> Result<Vec<PathBuf>, VmError> {
        let (paths, names): (Vec<&String>, Vec<&String>) =
            modules.iter().partition(|m| crate::config::is_path(m));
        let mut files = self.resolve_names(&names)?;
        for path in paths {
            let path = PathBuf::from(self.with_release(path)?);
            if !path.is_file() {
                return Err(VmError::Missing {
                    what: format!("kernel module {} (listed under `modules`)", path.display()),
                    hint: "build it (scripts/build-kmods.sh for those under targets/), or \
                           check the path (a relative one is relative to the configuration file)"
                        .to_owned(),
                });
            }
            files.push(path);
        }
        Ok(files)
    }

    /// A module path with [`RELEASE_PLACEHOLDER`] replaced by the kernel's release.
    fn with_release(&self, path: &str) -> Result<String, VmError> {
        if !path.contains(RELEASE_PLACEHOLDER) {
            return Ok(path.to_owned());
        }
        let release = self.release().ok_or_else(|| VmError::Missing {
            what: format!(
                "the release of the kernel {} for the module {path}",
                self.image.display()
            ),
            hint: format!(
                "{RELEASE_PLACEHOLDER} needs a kernel with a modules directory; \
                 write the release into the path instead"
            ),
        })?;
        Ok(path.replace(RELEASE_PLACEHOLDER, &release))
    }

    /// Module files for `names` (as in modules.dep) and their dependencies.
    fn resolve_names(&self, names: &[&String]) -> Result<Vec<PathBuf>, VmError> {
        let Some(modules_dir) = &self.modules_dir else {
            if let Some(name) = names.first() {
                return Err(VmError::Missing {
                    what: format!(
                        "kernel module `{name}` (the kernel {} has no modules directory)",
                        self.image.display()
                    ),
                    hint: "leave `modules` empty for a kernel with everything built in, or \
                           set `modules_dir` in the VM configuration"
                        .to_owned(),
                });
            }
            return Ok(Vec::new());
        };
        let dep_path = modules_dir.join("modules.dep");
        let text = std::fs::read_to_string(&dep_path)
            .map_err(|e| VmError::io(format!("reading {}", dep_path.display()), e))?;
        let deps = parse_modules_dep(&text);
        let mut order = Vec::new();
        for &name in names {
            let key = module_key(name);
            if !deps.contains_key(key.as_str()) {
                return Err(VmError::Missing {
                    what: format!("kernel module `{name}` in {}", dep_path.display()),
                    hint: "check the module name in the VM configuration (see modules.dep)"
                        .to_owned(),
                });
            }
            visit(&key, &deps, &mut order);
        }
        Ok(order.into_iter().map(|rel| modules_dir.join(rel)).collect())
    }
}

/// Orders "6.1.0-56-amd64" numerically, part by part.
fn version_key(release: &str) -> Vec<u64> {
    release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Module name as the kernel sees it: file stem, `-` as `_`.
fn module_key(name_or_path: &str) -> String {
    let file = name_or_path.rsplit('/').next().unwrap_or(name_or_path);
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

/// Maps a module name to (its path relative to the modules dir, its direct dependencies).
fn parse_modules_dep(text: &str) -> HashMap<String, (String, Vec<String>)> {
    text.lines()
        .filter_map(|line| {
            let (module, deps) = line.split_once(':')?;
            let deps = deps.split_whitespace().map(str::to_owned).collect();
            Some((module_key(module), (module.to_owned(), deps)))
        })
        .collect()
}

fn visit(key: &str, deps: &HashMap<String, (String, Vec<String>)>, order: &mut Vec<String>) {
    let Some((path, direct)) = deps.get(key) else {
        return;
    };
    if order.contains(path) {
        return;
    }
    for dep in direct {
        visit(&module_key(dep), deps, order);
    }
    order.push(path.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: &str = "kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko\n\
        kernel/lib/crc16.ko:\nkernel/fs/mbcache.ko:\nkernel/fs/jbd2/jbd2.ko: kernel/fs/mbcache.ko\n\
        kernel/drivers/nvdimm/nd_pmem.ko.xz: kernel/drivers/nvdimm/nd_btt.ko kernel/drivers/nvdimm/libnvdimm.ko\n\
        kernel/drivers/nvdimm/nd_btt.ko: kernel/drivers/nvdimm/libnvdimm.ko\nkernel/drivers/nvdimm/libnvdimm.ko:\n";

    fn kernel_with(dep: &str) -> (tempfile::TempDir, Kernel) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("modules.dep"), dep).unwrap();
        let kernel = Kernel {
            image: dir.path().join("vmlinuz"),
            modules_dir: Some(dir.path().to_owned()),
            system_map: None,
        };
        (dir, kernel)
    }

    #[test]
    fn dependencies_come_first_and_once() {
        let (dir, kernel) = kernel_with(DEP);
        let names = [
            "nd-pmem".to_owned(),
            "ext4".to_owned(),
            "libnvdimm".to_owned(),
        ];
        let got: Vec<String> = kernel
            .resolve_modules(&names)
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(
            got,
            [
                "kernel/drivers/nvdimm/libnvdimm.ko",
                "kernel/drivers/nvdimm/nd_btt.ko",
                "kernel/drivers/nvdimm/nd_pmem.ko.xz",
                "kernel/lib/crc16.ko",
                "kernel/fs/mbcache.ko",
                "kernel/fs/jbd2/jbd2.ko",
                "kernel/fs/ext4/ext4.ko",
            ]
        );
    }

    #[test]
    fn module_paths_follow_the_named_modules_and_must_exist() {
        let (dir, kernel) = kernel_with(DEP);
        let own = dir.path().join("own/oops.ko");
        std::fs::create_dir_all(own.parent().unwrap()).unwrap();
        std::fs::write(&own, "").unwrap();
        let modules = [own.display().to_string(), "jbd2".to_owned()];
        let got = kernel.resolve_modules(&modules).unwrap();
        assert_eq!(
            got,
            [
                dir.path().join("kernel/fs/mbcache.ko"),
                dir.path().join("kernel/fs/jbd2/jbd2.ko"),
                own.clone(),
            ]
        );
        let e = kernel
            .resolve_modules(&[dir.path().join("own/gone.ko").display().to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("gone.ko") && e.contains("build-kmods.sh"), "{e}");
        // a kernel with everything built in can still load a module of its own
        let built_in = Kernel {
            modules_dir: None,
            ..kernel
        };
        let modules = [own.display().to_string()];
        assert_eq!(built_in.resolve_modules(&modules).unwrap(), [own]);
    }

    /// `{release}` in a module path is the release of the kernel's modules directory,
    /// also when that directory is reached through a link named otherwise (as the
    /// unpacked 6.12 kernel's `modules` is).
    #[test]
    fn a_release_placeholder_names_the_module_built_for_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let release_dir = dir.path().join("lib/modules/9.9.9-test");
        std::fs::create_dir_all(&release_dir).unwrap();
        std::fs::write(release_dir.join("modules.dep"), "").unwrap();
        std::os::unix::fs::symlink("lib/modules/9.9.9-test", dir.path().join("modules")).unwrap();
        let own = dir.path().join("kmods/9.9.9-test/dm-dpwc.ko");
        std::fs::create_dir_all(own.parent().unwrap()).unwrap();
        std::fs::write(&own, "").unwrap();
        let kernel = Kernel {
            image: dir.path().join("vmlinuz"),
            modules_dir: Some(dir.path().join("modules")),
            system_map: None,
        };
        assert_eq!(kernel.release().as_deref(), Some("9.9.9-test"));
        let path = dir.path().join("kmods/{release}/dm-dpwc.ko");
        let got = kernel
            .resolve_modules(&[path.display().to_string()])
            .unwrap();
        assert_eq!(got, [own]);
        let built_in = Kernel {
            modules_dir: None,
            ..kernel
        };
        let e = built_in
            .resolve_modules(&[path.display().to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("{release}") && e.contains("release"), "{e}");
    }

    #[test]
    fn unknown_module_is_a_clear_error() {
        let (_dir, kernel) = kernel_with(DEP);
        let e = kernel
            .resolve_modules(&["ext5".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`ext5`") && e.contains("VM configuration"),
            "{e}"
        );
    }

    #[test]
    fn missing_kernel_says_how_to_install_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = Kernel::find_in(dir.path(), dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("setup.sh"), "{e}");
    }

    #[test]
    fn newest_release_wins() {
        let dir = tempfile::tempdir().unwrap();
        for release in ["6.1.0-9-amd64", "6.1.0-56-amd64", "6.1.0-10-amd64"] {
            std::fs::write(dir.path().join(format!("vmlinuz-{release}")), "").unwrap();
            std::fs::create_dir_all(dir.path().join("m").join(release)).unwrap();
            std::fs::write(dir.path().join("m").join(release).join("modules.dep"), "").unwrap();
        }
        let kernel = Kernel::find_in(dir.path(), &dir.path().join("m")).unwrap();
        assert!(
            kernel.image.ends_with("vmlinuz-6.1.0-56-amd64"),
            "{}",
            kernel.image.display()
        );
    }
}
