//! Every test of a suite, each as one run into DIR/<test>, and a results table.

use crate::guest::Guest;
use crate::options::PipelineOptions;
use crate::pipeline::run_test;
use crate::progress::Observer;
use crate::rundir::RunDir;
use crate::testcase::{Suite, TestCase};
use anyhow::Result;
use persim_analyze::Mark;
use persim_model::{CacheMode, Strategy};
use persim_trace::atomic_file::write_atomically;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// `results.json` of a suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteResults {
    pub suite: String,
    pub fs: String,
    pub cache: CacheMode,
    pub strategy: Strategy,
    pub tests: Vec<TestResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub test: String,
    pub mark: Mark,
    pub violations: usize,
    pub intervals: usize,
    pub seconds: f64,
    /// Why the test could not be run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Runs every test of `suite` into `out/<test>`; `before(i, n, name)` is called before each.
/// Writes results.json and results.txt into `out`.
pub fn run_suite(
    opts: &PipelineOptions,
    guest: &dyn Guest,
    suite: &Suite,
    out: &Path,
    mut before: impl FnMut(usize, usize, &str),
    observer: &mut dyn Observer,
) -> Result<SuiteResults> {
    let tests = suite.tests()?;
    let mut results = SuiteResults {
        suite: suite.name.clone(),
        fs: guest.name().to_string(),
        cache: opts.cache,
        strategy: opts.strategy,
        tests: Vec::new(),
    };
    for (i, (name, path)) in tests.iter().enumerate() {
        before(i, tests.len(), name);
        let started = Instant::now();
        let outcome = TestCase::load(path).and_then(|test| {
            let dir = RunDir::create(out.join(name))?;
            run_test(opts, guest, name, &test, &dir, observer)
        });
        let seconds = started.elapsed().as_secs_f64();
        results.tests.push(match outcome {
            Ok(report) => TestResult {
                test: name.clone(),
                mark: report.mark(),
                violations: report.violations(),
                intervals: report.checkpoints.len(),
                seconds,
                error: None,
            },
            Err(e) => TestResult {
                test: name.clone(),
                mark: Mark::NotRun,
                violations: 0,
                intervals: 0,
                seconds,
                error: Some(format!("{e:#}")),
            },
        });
    }
    write_atomically(
        &out.join("results.json"),
        serde_json::to_string_pretty(&results)?.as_bytes(),
    )?;
    write_atomically(&out.join("results.txt"), results.to_text().as_bytes())?;
    Ok(results)
}

impl SuiteResults {
    /// Whether any test found violations or could not be run.
    pub fn failed(&self) -> bool {
        self.tests.iter().any(|t| t.mark != Mark::Atomic)
    }

    /// `results.txt`: one line per test.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "suite {} on {} (cache {}, strategy {})",
            self.suite, self.fs, self.cache, self.strategy
        );
        let _ = writeln!(
            t,
            "{:<20} {:>6} {:>10} {:>9}",
            "test", "result", "violations", "seconds"
        );
        for test in &self.tests {
            let _ = writeln!(
                t,
                "{:<20} {:>6} {:>10} {:>9.1}{}",
                test.test,
                test.mark.symbol(),
                format!("{}/{}", test.violations, test.intervals),
                test.seconds,
                test.error.as_ref().map_or(String::new(), |e| format!(
                    "  {}",
                    e.lines().next().unwrap_or("")
                ))
            );
        }
        t
    }
}
