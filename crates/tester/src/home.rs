//! Where Persim's own files are — the bundled suites, the VM configurations, the tracing
//! plugin and the static guest tools — found by one resolver, so that an installed
//! `persim` works from any directory: `--home DIR`, then `$PERSIM_HOME`, then
//! `../share/persim` next to the executable (an installation), then the source tree that
//! holds the executable (`target/release/persim`, and the test binaries).
//!
//! An installation (`scripts/install.sh PREFIX`) is laid out as:
//!
//! ```text
//! PREFIX/bin/persim
//! PREFIX/share/persim/suites/   PREFIX/share/persim/vm/
//! PREFIX/share/persim/lib/libpersim_plugin.so
//! PREFIX/share/persim/guest/    the static guest tools
//! ```

use anyhow::{bail, Result};
use persim_vm::Artifacts;
use std::path::{Path, PathBuf};

/// The guest tools' target triple in a source tree (`cargo guest-tools`).
const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    /// A source tree: its `target/` holds the build.
    SourceTree(PathBuf),
    /// An installation's `share/persim`.
    Installed(PathBuf),
}

impl Home {
    /// Finds the home: `flag`, `$PERSIM_HOME`, next to the executable, the source tree.
    pub fn locate(flag: Option<&Path>) -> Result<Home> {
        let exe = std::env::current_exe().ok();
        Self::locate_from(
            flag,
            std::env::var_os("PERSIM_HOME").map(PathBuf::from),
            exe,
        )
    }

    fn locate_from(
        flag: Option<&Path>,
        env: Option<PathBuf>,
        exe: Option<PathBuf>,
    ) -> Result<Home> {
        if let Some(dir) = flag.map(Path::to_path_buf).or(env) {
            return Home::at(&dir).ok_or_else(|| {
                anyhow::anyhow!(
                    "{} is not a Persim home (a source tree, or an installation's \
                     share/persim with suites/ and vm/)",
                    dir.display()
                )
            });
        }
        let Some(exe) = exe else {
            bail!("cannot tell where this executable is: give --home DIR or set PERSIM_HOME");
        };
        let installed = exe.parent().map(|bin| bin.join("../share/persim"));
        if let Some(home) = installed.as_deref().and_then(Home::at) {
            return Ok(home);
        }
        exe.ancestors().skip(1).find_map(Home::at).ok_or_else(|| {
            anyhow::anyhow!(
                "cannot find Persim's suites and VM configurations for {}: install it \
                     with scripts/install.sh, or give --home DIR (or PERSIM_HOME)",
                exe.display()
            )
        })
    }

    /// The home at `dir`, if it is one.
    fn at(dir: &Path) -> Option<Home> {
        let has = |d: &Path| d.join("suites").is_dir() && d.join("vm").is_dir();
        let dir = dir.canonicalize().ok()?;
        if !has(&dir) {
            None
        } else if dir.join("Cargo.toml").is_file() {
            Some(Home::SourceTree(dir))
        } else {
            Some(Home::Installed(dir))
        }
    }

    fn root(&self) -> &Path {
        match self {
            Home::SourceTree(dir) | Home::Installed(dir) => dir,
        }
    }

    /// The bundled suites, one directory each.
    pub fn suites(&self) -> PathBuf {
        self.root().join("suites")
    }

    /// The VM configurations (`<fs>-dax.toml`).
    pub fn vm_configs(&self) -> PathBuf {
        self.root().join("vm")
    }

    /// The tracing plugin and the static guest tools.
    pub fn artifacts(&self) -> Result<Artifacts> {
        let (plugin_dir, guest_dir) = match self {
            Home::SourceTree(dir) => (
                dir.join("target/release"),
                dir.join("target").join(GUEST_TARGET).join("release"),
            ),
            Home::Installed(dir) => (dir.join("lib"), dir.join("guest")),
        };
        Ok(Artifacts::from_dirs(&plugin_dir, &guest_dir)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home_like(dir: &Path, source: bool) {
        std::fs::create_dir_all(dir.join("suites")).unwrap();
        std::fs::create_dir_all(dir.join("vm")).unwrap();
        if source {
            std::fs::write(dir.join("Cargo.toml"), "").unwrap();
        }
    }

    #[test]
    fn the_flag_then_the_environment_then_the_installation_then_the_source_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().canonicalize().unwrap();
        let (flag, env, tree) = (t.join("flag"), t.join("env"), t.join("tree"));
        home_like(&flag, false);
        home_like(&env, false);
        home_like(&tree, true);
        let installed = t.join("prefix/share/persim");
        home_like(&installed, false);
        let in_tree = tree.join("target/release/persim");
        let in_prefix = t.join("prefix/bin/persim");
        std::fs::create_dir_all(t.join("prefix/bin")).unwrap();

        let locate = |f: Option<&Path>, e: Option<&Path>, x: &Path| {
            Home::locate_from(f, e.map(Path::to_path_buf), Some(x.to_path_buf()))
        };
        assert_eq!(
            locate(Some(&flag), Some(&env), &in_tree).unwrap(),
            Home::Installed(flag.clone())
        );
        assert_eq!(
            locate(None, Some(&env), &in_tree).unwrap(),
            Home::Installed(env.clone())
        );
        assert_eq!(
            locate(None, None, &in_prefix).unwrap(),
            Home::Installed(installed.clone())
        );
        assert_eq!(
            locate(None, None, &in_tree).unwrap(),
            Home::SourceTree(tree.clone())
        );
        assert_eq!(Home::SourceTree(tree.clone()).suites(), tree.join("suites"));

        let e = locate(Some(&t.join("nothing")), None, &in_tree)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a Persim home"), "{e}");
        let e = locate(None, None, &t.join("elsewhere/bin/persim"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--home"), "{e}");
    }

    #[test]
    fn this_source_tree_is_found_from_the_test_executable() {
        let home = Home::locate(None).unwrap();
        assert!(matches!(home, Home::SourceTree(_)), "{home:?}");
        assert!(home.suites().join("fs/hello-world.toml").is_file());
        assert!(home.vm_configs().join("ext4-dax.toml").is_file());
    }
}
