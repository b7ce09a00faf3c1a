//! `persim report DIR`: print a run's report again, with the evidence asked for.

use anyhow::{Context, Result};
use clap::Args;
use persim_analyze::{line_diff, pending_at, Recovered, Report};
use persim_model::{Config, FailureKind};
use persim_trace::Reader;
use std::fs;
use std::path::{Path, PathBuf};

/// Print a run's report again; --diff and --dirty-lines add the evidence behind each
/// violation.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A run directory of `persim run` (or one test's directory of `persim suite`).
    pub dir: PathBuf,
    /// Line diffs between each violating interval's first state and its other states.
    #[arg(long)]
    pub diff: bool,
    /// The failure points behind each state of a violating interval.
    #[arg(long)]
    pub failure_points: bool,
    /// The lines with pending (not yet durable) stores at the final failure point of each
    /// interval with several final states.
    #[arg(long)]
    pub dirty_lines: bool,
    /// Print report.json instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Returns whether the run found violations.
pub fn run(args: &ReportArgs) -> Result<bool> {
    let path = args.dir.join("report.json");
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (is this a directory of `persim run`?)",
            path.display()
        )
    })?;
    let report: Report =
        serde_json::from_str(&text).with_context(|| format!("{} is malformed", path.display()))?;
    if args.json {
        println!("{text}");
        return Ok(report.violations() > 0);
    }
    print!("{}", report.to_text());
    for c in report.checkpoints.iter().filter(|c| c.violated()) {
        if args.failure_points {
            println!(
                "\ncheckpoint {} -> {}: failure points per state",
                c.from, c.to
            );
            for s in &c.states {
                let points: Vec<String> = s.failure_points.iter().map(u64::to_string).collect();
                println!("  {}: {}", s.name, points.join(", "));
            }
        }
        if args.diff {
            let Some((first, rest)) = c.states.split_first() else {
                continue;
            };
            let old = load_state(&args.dir, &first.images[0])?;
            for s in rest {
                let new = load_state(&args.dir, &s.images[0])?;
                println!("\ndiff {} -> {}:", first.name, s.name);
                print!("{}", line_diff(old.text(), new.text(), 2));
            }
        }
        if args.dirty_lines && !c.single_final_state {
            print_dirty_lines(&args.dir, c.to)?;
        }
    }
    Ok(report.violations() > 0)
}

fn load_state(dir: &Path, hash: &str) -> Result<Recovered> {
    let path = dir.join("states").join(format!("{hash}.json"));
    let text =
        fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is malformed", path.display()))
}

/// The pending lines at checkpoint `to`'s failure point: the stores whose order or
/// durability decides between the final states.
fn print_dirty_lines(dir: &Path, to: u64) -> Result<()> {
    let trace = dir.join("trace.ptrace");
    let reader = Reader::open(&trace)?;
    let header = reader.header();
    let index = checkpoint_index(dir, to)?;
    let state = pending_at(reader, Config::new(header.pm_size), index)?;
    println!("\ndirty lines at checkpoint {to} (entry {index}):");
    print!("{}", state.to_text());
    Ok(())
}

/// The trace index of `hypercall checkpoint N`, from the run's images.json.
fn checkpoint_index(dir: &Path, checkpoint: u64) -> Result<u64> {
    let path = dir.join("images.json");
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path)?)?;
    let kind = FailureKind::Checkpoint.to_string();
    v["failure_points"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["kind"] == kind.as_str() && p["checkpoint"] == checkpoint)
        .and_then(|p| p["index"].as_u64())
        .with_context(|| {
            format!(
                "{} has no failure point at checkpoint {checkpoint}",
                path.display()
            )
        })
}
