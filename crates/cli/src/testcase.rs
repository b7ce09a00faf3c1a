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
    #[serde(default)]
    pub ops: Vec<String>,
    /// Instead of `ops`: one command that marks its own checkpoints 1, 2, … (a program
    /// under test calling the hypercall around each of its operations).
    pub run: Option<String>,
    /// fs-dump fields the test does not care about.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// A guest command that prints the recovered state as JSON, instead of fs-dump of /mnt
    /// (e.g. a program's own recovery tool).
    pub state: Option<String>,
}

impl TestCase {
    pub fn load(path: &Path) -> Result<TestCase> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read test {}", path.display()))?;
        let test: TestCase = toml::from_str(&text)
            .with_context(|| format!("test {} is malformed", path.display()))?;
        test.check()
            .with_context(|| format!("test {} is malformed", path.display()))?;
        Ok(test)
    }

    fn check(&self) -> Result<()> {
        match (self.ops.is_empty(), &self.run) {
            (true, None) => bail!("give `ops` (at least one operation) or `run`"),
            (false, Some(_)) => bail!("give `ops` or `run`, not both"),
            _ => {}
        }
        if self.state.is_some() && !self.ignore.is_empty() {
            bail!("`ignore` lists fs-dump fields; a test with its own `state` command has none");
        }
        Ok(())
    }

    /// The traced commands: each operation between its two checkpoints, followed by a
    /// `sync`, so the interval holds the operation and the commit that makes it durable
    /// (without it, ext4 and XFS commit their journals seconds later, outside the interval).
    /// A `run` command is traced as it is.
    pub fn command(&self) -> String {
        if let Some(run) = &self.run {
            return format!("{run}\n");
        }
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

/// Resolves `--test`: a file path, the name of a test in the `fs` suite, or SUITE/NAME.
pub fn resolve(test: &str) -> Result<(String, PathBuf)> {
    let as_path = Path::new(test);
    let path = if as_path.is_file() {
        as_path.to_path_buf()
    } else {
        let (suite, name) = test.split_once('/').unwrap_or(("fs", test));
        let bundled = suite_dir(suite).join(format!("{name}.toml"));
        if !bundled.is_file() {
            bail!(
                "no test `{test}`: give a test file or one of: {}",
                list(suite)?
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

    #[test]
    fn a_run_command_marks_its_own_checkpoints_and_excludes_ops() {
        let parse = |text: &str| toml::from_str::<TestCase>(text).unwrap();
        let test =
            parse("description = \"log\"\nrun = \"tool append\"\nstate = \"tool recover\"\n");
        test.check().unwrap();
        assert_eq!(test.command(), "tool append\n");
        let both = parse("description = \"x\"\nops = [\"a\"]\nrun = \"b\"\n");
        assert!(both.check().unwrap_err().to_string().contains("not both"));
        let neither = parse("description = \"x\"\n");
        assert!(neither.check().unwrap_err().to_string().contains("`run`"));
        let ignored =
            parse("description = \"x\"\nrun = \"b\"\nstate = \"s\"\nignore = [\"atime\"]\n");
        assert!(ignored.check().is_err());
    }

    #[test]
    fn tests_of_other_suites_resolve_as_suite_slash_name() {
        let (name, path) = resolve("ringbuf/reuse").unwrap();
        assert_eq!(name, "reuse");
        assert!(
            path.ends_with("suites/ringbuf/reuse.toml"),
            "{}",
            path.display()
        );
        let e = resolve("ringbuf/nothing").unwrap_err().to_string();
        assert!(e.contains("no test `ringbuf/nothing`"), "{e}");
    }
}
