//! Test cases: one TOML file per test (suites/<suite>/<name>.toml), data, not code; and
//! suites, the directories that hold them.

use crate::home::Home;
use anyhow::{bail, Context, Result};
use persim_abi::FS_DUMP_FIELDS;
use persim_analyze::{Expect, Invariant};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize, Serialize)]
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
    /// Instead of `ops`: system calls of one process (`fs-ops` operations, with `open` and
    /// `close`), a checkpoint after each and no `sync` between them: `calls[N-1]` runs
    /// between checkpoints N and N+1, and must be durable when it returns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<String>,
    /// fs-dump fields the test does not care about.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// A guest command that prints the recovered state as JSON, instead of fs-dump of /mnt
    /// (e.g. a program's own recovery tool).
    pub state: Option<String>,
    /// Conditions on the state JSON that every crash state must meet (persim_analyze's
    /// `Invariant`); read, and refused if malformed, with the test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invariant: Vec<Invariant>,
    /// What paths hold after operation N (`[expect.N]`), checked in the final states of
    /// interval N → N+1.
    #[serde(default, skip_serializing_if = "Expect::is_empty")]
    pub expect: Expect,
}

use persim_abi::operations::{OPERATION_FAILED as OP_FAILED, OPERATION_STARTS as OP_STARTS};

impl TestCase {
    pub fn load(path: &Path) -> Result<TestCase> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read test {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("test {} is malformed", path.display()))
    }

    /// The test file's text, as [`TestCase::parse`] reads it back.
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string(self)?)
    }

    pub fn parse(text: &str) -> Result<TestCase> {
        let test: TestCase = toml::from_str(text)?;
        test.check()?;
        Ok(test)
    }

    fn check(&self) -> Result<()> {
        let forms = [
            !self.ops.is_empty(),
            self.run.is_some(),
            !self.calls.is_empty(),
        ];
        match forms.iter().filter(|&&given| given).count() {
            0 => bail!("give `ops` (at least one operation), `calls` or `run`"),
            1 => {}
            _ => bail!("give one of `ops`, `calls` and `run`"),
        }
        if let Some(call) = self.calls.iter().find(|c| c.contains('\'')) {
            bail!("`calls` entry `{call}` holds a quote: paths and values go without quotes");
        }
        if self.state.is_some() && !self.ignore.is_empty() {
            bail!("`ignore` lists fs-dump fields; a test with its own `state` command has none");
        }
        if let Some(field) = self
            .ignore
            .iter()
            .find(|f| !FS_DUMP_FIELDS.contains(&f.as_str()))
        {
            bail!(
                "`ignore` names an unknown fs-dump field `{field}` (fields: {})",
                FS_DUMP_FIELDS.join(", ")
            );
        }
        self.check_expect()
    }

    /// `expect` names operations the test has and fs-dump fields it dumps.
    fn check_expect(&self) -> Result<()> {
        if self.expect.is_empty() {
            return Ok(());
        }
        if self.state.is_some() {
            bail!(
                "`expect` names paths and fs-dump fields; a test with its own `state` command \
                 states what its states must hold as `invariant`"
            );
        }
        if let Some(n) = self
            .expect
            .0
            .keys()
            .find(|&&n| self.run.is_none() && n > self.operations().len() as u64)
        {
            bail!(
                "`expect.{n}` names operation {n}, but the test has {} operation(s)",
                self.operations().len()
            );
        }
        for field in self.expect.fields() {
            if !FS_DUMP_FIELDS.contains(&field) {
                bail!(
                    "`expect` names an unknown fs-dump field `{field}` (fields: {})",
                    FS_DUMP_FIELDS.join(", ")
                );
            }
            if self.ignore.iter().any(|f| f == field) {
                bail!(
                    "`expect` names `{field}`, which the test ignores: take it out of `ignore` \
                     or of `expect`"
                );
            }
        }
        Ok(())
    }

    /// The traced commands: each operation between its two checkpoints, followed by a
    /// `sync`, so the interval holds the operation and the commit that makes it durable
    /// (without it, ext4 and XFS commit their journals seconds later, outside the interval).
    /// An operation that fails ends the run with its exit code, so that the test fails
    /// instead of judging a workload that did not happen. A `run` command is traced as it is.
    pub fn command(&self) -> String {
        if let Some(run) = &self.run {
            return format!("{run}\n");
        }
        if !self.calls.is_empty() {
            let calls: Vec<String> = self.calls.iter().map(|c| format!("'{c}'")).collect();
            return format!("fs-ops calls {}\n", calls.join(" "));
        }
        let mut command = String::new();
        for (i, op) in self.ops.iter().enumerate() {
            let n = i + 1;
            command.push_str(&format!(
                "hypercall checkpoint {n}\necho {OP_STARTS}{n}\n{op}\npersim_rc=$?\nif [ $persim_rc -ne 0 ]; then echo \"{OP_FAILED} {n} failed (exit code $persim_rc)\"; exit $persim_rc; fi\nsync\n"
            ));
        }
        command.push_str(&format!("hypercall checkpoint {}\n", self.ops.len() + 1));
        command
    }

    /// The operations between checkpoints: `ops`, or `calls`; none for `run`.
    pub fn operations(&self) -> &[String] {
        match self.calls.is_empty() {
            true => &self.ops,
            false => &self.calls,
        }
    }

    /// What the guest printed, with a heading per operation.
    pub fn output_by_operation(&self, output: &str) -> String {
        let mut text = String::new();
        for line in output.lines() {
            let op = line
                .strip_prefix(OP_STARTS)
                .and_then(|n| n.trim().parse::<usize>().ok())
                .and_then(|n| Some((n, self.operations().get(n.checked_sub(1)?)?)));
            match op {
                Some((n, op)) => text.push_str(&format!("== operation {n}: {op}\n")),
                None => {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        text
    }

    /// The operation the guest was running when its output ends (for a hang or a crash
    /// during the traced run): `operation N (`op`)`, from the last operation marker.
    pub fn operation_at_end(&self, output: &str) -> Option<String> {
        output.lines().rev().find_map(|l| {
            let n: usize = l.trim().strip_prefix(OP_STARTS)?.trim().parse().ok()?;
            let op = self.operations().get(n.checked_sub(1)?)?;
            Some(format!("operation {n} (`{op}`)"))
        })
    }

    /// Why the traced commands failed, from what the guest printed: the failed operation
    /// as the test wrote it and, on the same first line (what a results table shows), the
    /// first line the failing command printed; then the guest's whole output.
    pub fn failure(&self, exit_code: i32, output: &str) -> String {
        let op = output
            .lines()
            .find_map(|l| {
                l.strip_prefix(OP_FAILED)?
                    .trim()
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .and_then(|n: usize| Some((n, self.operations().get(n.checked_sub(1)?)?)));
        let what = match op {
            Some((n, op)) => format!("operation {n} (`{op}`) failed with exit code {exit_code}"),
            None if self.run.is_some() => {
                format!("the `run` command failed with exit code {exit_code}")
            }
            None => format!("the test's commands failed with exit code {exit_code}"),
        };
        // The failing command's output follows the last operation marker; the line the
        // script adds on a failure says nothing new.
        let reason = output
            .lines()
            .rev()
            .take_while(|l| !l.starts_with(OP_STARTS))
            .filter(|l| !l.trim().is_empty() && !l.starts_with(OP_FAILED))
            .last();
        let output = self.output_by_operation(output);
        if output.trim().is_empty() {
            return format!("{what}; the guest printed nothing");
        }
        let reason = reason.map_or(String::new(), |r| format!(": {}", r.trim()));
        format!("{what}{reason}\nthe guest printed:\n{}", output.trim_end())
    }
}

/// A directory of tests.
#[derive(Clone, Debug)]
pub struct Suite {
    pub name: String,
    pub dir: PathBuf,
}

impl Suite {
    /// The bundled suite `name` (`suites/<name>` of Persim's home).
    pub fn bundled(home: &Home, name: &str) -> Suite {
        Suite {
            name: name.to_string(),
            dir: home.suites().join(name),
        }
    }

    /// A directory of test files given by its path, else the bundled suite of that name.
    pub fn named_or_dir(home: &Home, suite: &str) -> Suite {
        let dir = Path::new(suite);
        if dir.is_dir() {
            let name = dir
                .file_name()
                .map_or(suite.into(), |n| n.to_string_lossy().into());
            return Suite {
                name,
                dir: dir.to_path_buf(),
            };
        }
        Suite::bundled(home, suite)
    }

    /// The tests of the suite, by name.
    pub fn tests(&self) -> Result<Vec<(String, PathBuf)>> {
        let mut tests: Vec<(String, PathBuf)> = std::fs::read_dir(&self.dir)
            .with_context(|| format!("cannot read suite {}", self.dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .map(|p| (name_of(&p), p))
            .collect();
        tests.sort();
        Ok(tests)
    }

    /// Resolves `--test`: a file path, the name of a test in the `fs` suite, or SUITE/NAME.
    pub fn resolve(home: &Home, test: &str) -> Result<(String, PathBuf)> {
        let as_path = Path::new(test);
        if as_path.is_file() {
            return Ok((name_of(as_path), as_path.to_path_buf()));
        }
        let (suite, name) = test.split_once('/').unwrap_or(("fs", test));
        let suite = Suite::bundled(home, suite);
        let path = suite.dir.join(format!("{name}.toml"));
        if !path.is_file() {
            let known = suite.tests().unwrap_or_default();
            let names: Vec<&str> = known.iter().map(|(n, _)| n.as_str()).collect();
            if names.is_empty() {
                bail!(
                    "no test `{test}`: no test file of that name, and no suite `{}`",
                    suite.name
                );
            }
            bail!(
                "no test `{test}`: give a test file, or one of the {} suite: {}",
                suite.name,
                names.join(", ")
            );
        }
        Ok((name.to_string(), path))
    }
}

fn name_of(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> Home {
        Home::locate(None).unwrap()
    }

    #[test]
    fn expectations_are_read_with_the_test_and_refused_with_what_to_change() {
        let text = "description = \"append\"\nops = [\"echo World >> /mnt/f\"]\n\
                    ignore = [\"atime\"]\n[expect.1]\n\"/mnt/f\" = \"Hello\\nWorld\\n\"\n";
        let test = TestCase::parse(text).unwrap();
        assert_eq!(
            test.expect.0[&1]["/mnt/f"],
            persim_analyze::Expected::Contents("Hello\nWorld\n".into())
        );
        // test.toml of a run directory reads back the same
        let again = TestCase::parse(&test.to_toml().unwrap()).unwrap();
        assert_eq!(again.expect, test.expect);
        let refused = |text: &str, says: &str| {
            let e = format!("{:#}", TestCase::parse(text).unwrap_err());
            assert!(e.contains(says), "{text}: {e}");
        };
        let ops = "description = \"x\"\nops = [\"true\"]\nignore = [\"atime\"]\n";
        refused(
            &format!("{ops}[expect.2]\n\"/mnt/f\" = \"a\"\n"),
            "`expect.2` names operation 2, but the test has 1 operation(s)",
        );
        refused(
            &format!("{ops}[expect.1]\n\"/mnt/f\" = {{ colour = \"red\" }}\n"),
            "unknown fs-dump field `colour`",
        );
        refused(
            &format!("{ops}[expect.1]\n\"/mnt/f\" = {{ atime = \"1.0\" }}\n"),
            "`expect` names `atime`, which the test ignores",
        );
        refused(
            &format!("{ops}[expect.one]\n\"/mnt/f\" = \"a\"\n"),
            "keyed by operation number",
        );
        refused(
            "description = \"x\"\nrun = \"p\"\nstate = \"s\"\n[expect.1]\n\"/mnt/f\" = \"a\"\n",
            "as `invariant`",
        );
        // A program marking its own checkpoints: any operation number.
        let run = "description = \"x\"\nrun = \"p\"\n[expect.3]\n\"/mnt/f\" = false\n";
        assert!(TestCase::parse(run).is_ok());
    }

    #[test]
    fn a_hang_is_blamed_on_the_last_operation_that_started() {
        let test =
            TestCase::parse("description = \"d\"\nops = [\"echo a > /mnt/a\", \"sleep 1000\"]")
                .unwrap();
        let log = format!("x\n{OP_STARTS}1\nok\n{OP_STARTS}2\n[ 12.3] rcu: stall\n");
        assert_eq!(
            test.operation_at_end(&log).as_deref(),
            Some("operation 2 (`sleep 1000`)")
        );
        assert_eq!(test.operation_at_end("booting\nmkfs"), None);
    }

    #[test]
    fn ops_run_between_consecutive_checkpoints_and_stop_at_a_failure() {
        let test = TestCase::parse(
            "description = \"link\"\nops = [\"ln a b\", \"rm b\"]\nignore = [\"atime\"]\n",
        )
        .unwrap();
        let command = test.command();
        let ln = command.find("ln a b").unwrap();
        let rm = command.find("rm b").unwrap();
        let cp = |n: u32| {
            command
                .find(&format!("hypercall checkpoint {n}\n"))
                .unwrap()
        };
        assert!(cp(1) < ln && ln < cp(2) && cp(2) < rm && rm < cp(3));
        assert!(command.ends_with("sync\nhypercall checkpoint 3\n"));
        let check = command[ln..cp(2)].find("exit $persim_rc").unwrap();
        assert!(
            check < command[ln..cp(2)].find("sync").unwrap(),
            "{command}"
        );
        assert!(TestCase::parse("description = \"x\"\nops = []\nbogus = 1\n").is_err());
        let output = "@@PERSIM-OP 1\nlinked\n@@PERSIM-OP 2\n";
        assert_eq!(
            test.output_by_operation(output),
            "== operation 1: ln a b\nlinked\n== operation 2: rm b\n"
        );
    }

    #[test]
    fn a_failed_operation_is_named_with_the_guest_output() {
        let test =
            TestCase::parse("description = \"x\"\nops = [\"true\", \"cat /nope\"]\n").unwrap();
        let output = "cat: can't open '/nope': No such file or directory\n\
                      persim: operation 2 failed (exit code 1)\n";
        let message = test.failure(
            1,
            &format!("@@PERSIM-OP 1\nfine\n@@PERSIM-OP 2\n\n{output}"),
        );
        assert_eq!(
            message.lines().next().unwrap(),
            "operation 2 (`cat /nope`) failed with exit code 1: cat: can't open '/nope': No such \
             file or directory",
        );
        assert!(
            message.contains("== operation 1: true\nfine\n"),
            "{message}"
        );
        let message = test.failure(3, "boom");
        assert!(
            message.starts_with("the test's commands failed with exit code 3: boom\n"),
            "{message}"
        );
        let message = test.failure(
            1,
            "@@PERSIM-OP 1\npersim: operation 1 failed (exit code 1)\n",
        );
        assert!(
            message
                .starts_with("operation 1 (`true`) failed with exit code 1\nthe guest printed:\n"),
            "{message}"
        );
        assert_eq!(
            test.failure(1, ""),
            "the test's commands failed with exit code 1; the guest printed nothing"
        );
    }

    #[test]
    fn a_run_command_marks_its_own_checkpoints_and_excludes_ops() {
        let parse = |text: &str| TestCase::parse(text).map_err(|e| e.to_string());
        let test =
            parse("description = \"log\"\nrun = \"tool append\"\nstate = \"tool recover\"\n")
                .unwrap();
        assert_eq!(test.command(), "tool append\n");
        let both = parse("description = \"x\"\nops = [\"a\"]\nrun = \"b\"\n").unwrap_err();
        assert!(
            both.contains("give one of `ops`, `calls` and `run`"),
            "{both}"
        );
        let quoted = parse("description = \"x\"\ncalls = [\"open /mnt/'f\"]\n").unwrap_err();
        assert!(quoted.contains("holds a quote"), "{quoted}");
        let neither = parse("description = \"x\"\n").unwrap_err();
        assert!(neither.contains("`run`"), "{neither}");
        assert!(
            parse("description = \"x\"\nrun = \"b\"\nstate = \"s\"\nignore = [\"atime\"]\n")
                .is_err()
        );
    }

    #[test]
    fn an_invariant_that_cannot_be_evaluated_is_refused_with_the_test() {
        let parse = |invariants: &str| {
            let text = format!("description = \"x\"\nrun = \"p\"\ninvariant = [{invariants}]\n");
            TestCase::parse(&text).map_err(|e| format!("{e:#}"))
        };
        let test = parse("'/count <= len(/items)', '/done'").unwrap();
        assert_eq!(test.invariant.len(), 2);
        assert_eq!(test.invariant[0].text(), "/count <= len(/items)");
        let again = TestCase::parse(&test.to_toml().unwrap()).unwrap();
        assert_eq!(again.invariant, test.invariant);
        let e = parse("'/done', 'count <= 3'").unwrap_err();
        assert!(
            e.contains("invariant `count <= 3`: `count <= 3` is neither a JSON pointer"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_ignored_field_is_refused_before_any_boot() {
        let e = TestCase::parse("description = \"x\"\nops = [\"a\"]\nignore = [\"atimes\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown fs-dump field `atimes`") && e.contains("atime, "),
            "{e}"
        );
    }

    #[test]
    fn tests_of_other_suites_resolve_as_suite_slash_name() {
        let (name, path) = Suite::resolve(&home(), "ringbuf/reuse").unwrap();
        assert_eq!(name, "reuse");
        assert!(
            path.ends_with("suites/ringbuf/reuse.toml"),
            "{}",
            path.display()
        );
        let e = Suite::resolve(&home(), "ringbuf/nothing")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no test `ringbuf/nothing`") && e.contains("reuse"),
            "{e}"
        );
        let e = Suite::resolve(&home(), "nosuite/x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no suite `nosuite`"), "{e}");
    }

    #[test]
    fn every_bundled_test_is_valid() {
        for suite in ["fs", "ringbuf"] {
            let tests = Suite::bundled(&home(), suite).tests().unwrap();
            assert!(!tests.is_empty());
            for (_, path) in tests {
                TestCase::load(&path).unwrap();
            }
        }
    }
}
