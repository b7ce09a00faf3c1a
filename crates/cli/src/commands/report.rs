//! `persim report DIR`: print a run's report again, with the evidence asked for.

use anyhow::{Context, Result};
use clap::Args;
use persim_analyze::{line_diff, pending_at, Report};
use persim_image::ImagesIndex;
use persim_model::Config;
use persim_tester::RunDir;
use persim_trace::{Reader, Symbols};
use std::path::PathBuf;

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
    let dir = RunDir::new(&args.dir);
    let report = dir.read_report()?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(!report.passed());
    }
    out!("{}", report.to_text())?;
    let evidence = args.diff || args.failure_points || args.dirty_lines;
    if evidence && report.violations() == 0 {
        outln!("\nno interval is violated: there is no evidence to show")?;
    }
    for c in report.checkpoints.iter().filter(|c| c.violated()) {
        if args.failure_points {
            outln!(
                "\ncheckpoint {} -> {}: failure points per state",
                c.from,
                c.to
            )?;
            for s in &c.states {
                let points: Vec<String> = s.failure_points.iter().map(u64::to_string).collect();
                outln!("  {}: {}", s.name, points.join(", "))?;
            }
        }
        if args.diff {
            let Some((first, rest)) = c.states.split_first() else {
                continue;
            };
            let old = dir.read_state(&first.images[0])?;
            for s in rest {
                let new = dir.read_state(&s.images[0])?;
                outln!("\ndiff {} -> {}:", first.name, s.name)?;
                out!("{}", line_diff(old.text(), new.text(), 2))?;
            }
        }
        if args.dirty_lines && !c.single_final_state {
            print_dirty_lines(&dir, &report, c.to)?;
        }
    }
    Ok(!report.passed())
}

/// The pending lines at checkpoint `to`'s failure point: the stores whose order or
/// durability decides between the final states. Replayed with the run's cache mode.
fn print_dirty_lines(dir: &RunDir, report: &Report, to: u64) -> Result<()> {
    let reader = Reader::open(&dir.trace())?;
    let mut config = Config::of_header(&reader.header());
    config.cache = report.cache;
    let index_path = dir.images_index();
    let index = ImagesIndex::read(&index_path)?
        .checkpoint_index(to)
        .with_context(|| {
            format!(
                "{} has no failure point at checkpoint {to}",
                index_path.display()
            )
        })?;
    let mut state = pending_at(reader, config, index)?;
    if let Some(symbols) = Symbols::of_trace(&dir.trace()) {
        state.describe_code(Reader::open(&dir.trace())?, &symbols)?;
    }
    outln!("\ndirty lines at checkpoint {to} (entry {index}):")?;
    out!("{}", state.to_text())?;
    Ok(())
}
