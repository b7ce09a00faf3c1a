//! Test cases: one TOML file per test (suites/<suite>/<name>.toml), data, not code.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    pub description: String,
    /// Shell commands run after mkfs and mount, before tracing starts.
    #[serde(default)]
    pub setup: String,
    /// One operation per checkpoint interval: `ops[N-1]` runs between checkpoints N and N+1.
    pub ops: Vec<String>,
    /// fs-dump fields the test does not care about.
    #[serde(default)]
    pub ignore: Vec<String>,
}

impl TestCase {
    pub fn load(path: &Path) -> Result<TestCase> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read test {}", path.display()))?;
        let test: TestCase = toml::from_str(&text)
            .with_context(|| format!("test {} is malformed", path.display()))?;
        if test.ops.is_empty() {
            bail!(
                "test {} has no ops: give at least one operation",
                path.display()
            );
        }
        Ok(test)
    }

    /// The traced commands: each operation between its two checkpoints, followed by a
    /// `sync`, so the interval holds the operation and the commit that makes it durable
    /// (without it, ext4 and XFS commit their journals seconds later, outside the interval).
    pub fn command(&self) -> String {
        let mut command = String::new();
        for (i, op) in self.ops.iter().enumerate() {
            command.push_str(&format!("hypercall checkpoint {}\n{op}\nsync\n", i + 1));
        }
        command.push_str(&format!("hypercall checkpoint {}\n", self.ops.len() + 1));
        command
    }
}

/// The directory of a bundled suite (`suites/<name>` in the source tree).
pub fn suite_dir(suite: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../suites")
        .join(suite)
}

/// Resolves `--test`: a file path, or the name of a test in the `fs` suite.
pub fn resolve(test: &str) -> Result<(String, PathBuf)> {
    let as_path = Path::new(test);
    let path = if as_path.is_file() {
        as_path.to_path_buf()
    } else {
        let bundled = suite_dir("fs").join(format!("{test}.toml"));
        if !bundled.is_file() {
            bail!(
                "no test `{test}`: give a test file or one of: {}",
                list("fs")?
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        bundled
    };
    let name = path
        .file_stem()
        .map_or_else(|| test.to_string(), |s| s.to_string_lossy().into_owned());
    Ok((name, path))
}

/// The tests of a suite, by name.
pub fn list(suite: &str) -> Result<Vec<(String, PathBuf)>> {
    let dir = suite_dir(suite);
    let mut tests: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read suite {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            (
                p.file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    tests.sort();
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_run_between_consecutive_checkpoints() {
        let test: TestCase = toml::from_str(
            "description = \"link\"\nops = [\"ln a b\", \"rm b\"]\nignore = [\"atime\"]\n",
        )
        .unwrap();
        assert_eq!(
            test.command(),
            "hypercall checkpoint 1\nln a b\nsync\nhypercall checkpoint 2\nrm b\nsync\nhypercall checkpoint 3\n"
        );
        assert!(toml::from_str::<TestCase>("description = \"x\"\nops = []\nbogus = 1\n").is_err());
    }
}
