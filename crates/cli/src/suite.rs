//! `persim suite fs --fs ext4 --out DIR`: every test of a suite, and a results table.

use crate::run::{run_test, write_atomically, PipelineArgs};
use crate::testcase::{self, TestCase};
use anyhow::Result;
use clap::Args;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// Run every test of a suite (each as `persim run` would, into DIR/<test>) and print a
/// results table: ✓ atomic, A atomicity violation, S multiple final states, E state
/// extraction error, C recovery crash, ! the test could not be run.
#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// The suite: a directory under suites/ (fs, ringbuf).
    pub suite: String,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Where the runs and results.json / results.txt go (an existing one is resumed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Serialize)]
struct Results {
    suite: String,
    fs: String,
    cache: String,
    strategy: String,
    tests: Vec<TestResult>,
}

#[derive(Serialize)]
struct TestResult {
    test: String,
    /// ✓, A, S, E, C, or ! when the test could not be run.
    mark: String,
    violations: usize,
    intervals: usize,
    seconds: f64,
    /// Why the test could not be run.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Returns whether any test found violations or could not be run.
pub fn run(args: &SuiteArgs) -> Result<bool> {
    let config = args.pipeline.vm.config()?;
    let tests = testcase::list(&args.suite)?;
    let mut results = Results {
        suite: args.suite.clone(),
        fs: config.name.clone(),
        cache: args.pipeline.cache.to_string(),
        strategy: args.pipeline.strategy.to_string(),
        tests: Vec::new(),
    };
    for (i, (name, path)) in tests.iter().enumerate() {
        eprintln!("persim suite: [{}/{}] {name}", i + 1, tests.len());
        let started = Instant::now();
        let outcome = TestCase::load(path)
            .and_then(|t| run_test(&args.pipeline, name, &t, &args.out.join(name)));
        let seconds = started.elapsed().as_secs_f64();
        results.tests.push(match outcome {
            Ok(report) => TestResult {
                test: name.clone(),
                mark: report.mark().symbol().to_string(),
                violations: report.violations(),
                intervals: report.checkpoints.len(),
                seconds,
                error: None,
            },
            Err(e) => TestResult {
                test: name.clone(),
                mark: "!".to_string(),
                violations: 0,
                intervals: 0,
                seconds,
                error: Some(format!("{e:#}")),
            },
        });
    }
    let table = table(&results);
    write_atomically(
        &args.out.join("results.json"),
        serde_json::to_string_pretty(&results)?.as_bytes(),
    )?;
    write_atomically(&args.out.join("results.txt"), table.as_bytes())?;
    print!("{table}");
    Ok(results.tests.iter().any(|t| t.mark != "✓"))
}

fn table(r: &Results) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "suite {} on {} (cache {}, strategy {})",
        r.suite, r.fs, r.cache, r.strategy
    );
    let _ = writeln!(
        t,
        "{:<20} {:>6} {:>10} {:>9}",
        "test", "result", "violations", "seconds"
    );
    for test in &r.tests {
        let _ = writeln!(
            t,
            "{:<20} {:>6} {:>10} {:>9.1}{}",
            test.test,
            test.mark,
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
