//! `persim report DIR`: print a run's report again, with the evidence asked for.

use crate::html;
use anyhow::{bail, Context, Result};
use clap::Args;
use persim_analyze::{line_diff, CheckpointVerdict, Report, StatesComparison};
use persim_image::ImagesIndex;
use persim_inspect::pending_at;
use persim_model::{Config, Strategy};
use persim_tester::{FaultsReport, RunDir, SuiteResults};
use persim_trace::{Reader, Symbols};
use std::path::{Path, PathBuf};

/// Print a run's report again; --diff and --dirty-lines add the evidence behind each
/// violation. With --html, write one self-contained HTML page of a run, a campaign or a
/// fault campaign instead.
///
/// The page loads nothing from the network (style, filter script and plots are inline), so
/// it opens from a mail attachment or a CI artifact:
///   persim report runs/hello --html hello.html          # a run: verdicts, diffs, culprits
///   persim report runs/ace --html ace.html              # a campaign: filters, signatures
///   persim report runs/hello/faults --html faults.html  # `persim faults`: table and plot
/// A campaign's page holds each failing test's run report; for merged shards, give
/// `persim campaign merge --html`, which knows the shards' directories.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ReportArgs {
    /// A run directory of `persim run` (or one test's directory of `persim suite`); with
    /// --html also a directory of `persim suite` or `persim campaign run` (results.json)
    /// or of `persim faults` (faults.json).
    pub dir: PathBuf,
    /// Write the report as one self-contained HTML page to FILE instead of printing it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["diff", "failure_points", "dirty_lines", "json"])]
    pub html: Option<PathBuf>,
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
    /// Print report.json instead of the text (with --compare, the comparison).
    #[arg(long)]
    pub json: bool,
    /// Compare the distinct states this run recovered with those of OTHER, a run of the
    /// same test (e.g. `--scope program` against `--scope all`, both judged from one
    /// trace with --trace-from), interval by interval, as sets: each side's count, the
    /// states only one has, and each run's images and failure points sampled
    /// (--max-images). Exit code 1 when OTHER has a state this run lacks.
    #[arg(long, value_name = "OTHER", conflicts_with_all = ["html", "diff", "failure_points", "dirty_lines"])]
    pub compare: Option<PathBuf>,
}

/// Returns whether the run found violations.
pub fn run(args: &ReportArgs) -> Result<bool> {
    if let Some(file) = &args.html {
        return html_report(&args.dir, file);
    }
    let dir = RunDir::new(&args.dir);
    let report = dir.read_report()?;
    if let Some(other) = &args.compare {
        return compare(&dir, &report, &RunDir::new(other), args.json);
    }
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
            for d in state_diffs(&dir, c)? {
                outln!("\ndiff {} -> {}:", d.from, d.to)?;
                out!("{}", d.diff)?;
            }
        }
        if args.dirty_lines && !c.single_final_state {
            print_dirty_lines(&dir, &report, c.to)?;
        }
    }
    Ok(!report.passed())
}

/// `--compare`: this run's states against `other`'s; returns whether `other` has a
/// state this run lacks.
fn compare(dir: &RunDir, report: &Report, other: &RunDir, json: bool) -> Result<bool> {
    let theirs = other.read_report()?;
    if theirs.test != report.test || theirs.fs != report.fs {
        bail!(
            "{} ran {} on {}, {} ran {} on {}: compare two runs of the same test and file \
             system (e.g. judged from one trace with `persim run --trace-from`)",
            dir.root().display(),
            report.test,
            report.fs,
            other.root().display(),
            theirs.test,
            theirs.fs
        );
    }
    let (mine, recovered_here) = (Searched::of(dir, report)?, dir.read_report_states(report)?);
    let their_search = Searched::of(other, &theirs)?;
    let recovered_there = other.read_report_states(&theirs)?;
    let states = StatesComparison::new(
        &report.checkpoints,
        &theirs.checkpoints,
        |h| recovered_here.get(h),
        |h| recovered_there.get(h),
    );
    if json {
        let value = serde_json::json!({
            "here": mine.to_json(), "there": their_search.to_json(),
            "covers": states.covers(), "intervals": states.intervals,
        });
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        outln!("this run:  {}: {}", dir.root().display(), mine.describe())?;
        outln!(
            "the other: {}: {}",
            other.root().display(),
            their_search.describe()
        )?;
        out!("{}", states.to_text())?;
    }
    Ok(!states.covers())
}

/// How much of the crash images a run searched.
struct Searched {
    strategy: Strategy,
    images: usize,
    failure_points: usize,
    /// Failure points with more images than --max-images, where a sample was taken.
    sampled: usize,
}

impl Searched {
    fn of(dir: &RunDir, report: &Report) -> Result<Searched> {
        let index = ImagesIndex::read(&dir.images_index())?;
        Ok(Searched {
            strategy: report.strategy,
            images: index.images.len(),
            failure_points: index.failure_points.len(),
            sampled: index.failure_points.iter().filter(|p| p.incomplete).count(),
        })
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "strategy": self.strategy, "images": self.images,
            "failure_points": self.failure_points, "sampled": self.sampled,
        })
    }

    fn describe(&self) -> String {
        let sampled = match self.sampled {
            0 => "none sampled".to_string(),
            n => format!("sampled at {n}"),
        };
        format!(
            "{}, {} images, {} failure points ({sampled})",
            self.strategy, self.images, self.failure_points
        )
    }
}

/// The page of `dir`, whichever kind of directory it is; returns whether it holds
/// findings (violations, failing tests, silent or crashing faults).
fn html_report(dir: &Path, file: &Path) -> Result<bool> {
    let run = RunDir::new(dir);
    let (page, found) = if run.report_json().exists() {
        let report = run.read_report()?;
        (html::run_page(&run, &report)?, report.violations() > 0)
    } else if let Some(faults) = FaultsReport::load(dir)? {
        (
            html::faults_page(&faults)?,
            faults.findings().next().is_some(),
        )
    } else if SuiteResults::file(dir).exists() {
        let results = SuiteResults::load(dir)?;
        let page = html::campaign_page(&results, |test| Some(RunDir::new(dir.join(test))))?;
        (page, results.failed())
    } else {
        bail!(
            "{} holds no report: give a directory of `persim run` (report.json), of `persim \
             suite` or `persim campaign run` (results.json), or of `persim faults` (faults.json)",
            dir.display()
        );
    };
    html::write(file, &page)?;
    Ok(found)
}

/// One state's line diff against its interval's first state.
pub struct StateDiff {
    pub from: String,
    pub to: String,
    pub diff: String,
}

/// What `--diff` shows of an interval: each state's diff against its first state.
pub fn state_diffs(dir: &RunDir, c: &CheckpointVerdict) -> Result<Vec<StateDiff>> {
    let Some((first, rest)) = c.states.split_first() else {
        return Ok(Vec::new());
    };
    let old = dir.read_state(&first.images[0])?;
    let mut diffs = Vec::new();
    for s in rest {
        let new = dir.read_state(&s.images[0])?;
        diffs.push(StateDiff {
            from: first.name.clone(),
            to: s.name.clone(),
            diff: line_diff(old.text(), new.text(), 2),
        });
    }
    Ok(diffs)
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
