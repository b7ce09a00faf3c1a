//! `persim profile TRACE|RUN_DIR`: how a trace uses PM; with `--by` or
//! `--sample-interval`, split per process or function and the PEBS estimator.

use crate::html;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use persim_inspect::{account, profile, profile_svgs, By};
use persim_tester::RunDir;
use persim_trace::atomic_file::write_atomically;
use persim_trace::{Header, Reader, Symbols};
use std::path::PathBuf;

/// Profile how a trace uses PM, per checkpoint interval and for the whole trace
///
/// Columns: entries; bytes stored; NT, the share of bytes stored non-temporally; flushes and
/// fences per KiB stored; ampl., the write amplification if every fence epoch wrote whole
/// 256-byte XPLines (XPLine bytes touched / bytes stored); partial XPL, XPLines an epoch
/// wrote only partly (read-modify-write on the media); ISAD, the share of accesses not
/// contiguous with the previous one (0 sequential, 1 random); reads, when traced with
/// --reads. Then stores by size, flushes and fences by kind, and the code that stored,
/// flushed and fenced, per function (through the symbols recorded with the trace) or per
/// pc. docs/design/analysis.md defines each figure.
///
/// Exact accounting: `--by process` splits bytes stored (and their share, NT share),
/// stores, flushes, fences and reads by the process (pid) that made them, with a row per
/// thread (tid) of a process that has several, and bytes stored over the trace as a
/// sparkline; `--by function` by the function of the instruction. `--sample-interval N`
/// runs the PEBS estimator (a sample every N-th store counts for its size x N bytes) and
/// reports its error against the exact bytes per process and per store size. With either,
/// only these tables are printed.
///   persim profile run/ --by process
///   persim profile t.ptrace --by function --json
///   persim profile t.ptrace --by process --sample-interval 10007
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ProfileArgs {
    /// A trace file (text or binary), or a run directory.
    pub trace: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also draw SVG plots into this directory: bytes-over-time.svg (cached and NT bytes
    /// stored over the trace), epoch-sizes.svg (fence epochs by bytes written) and
    /// written-lines.svg (a heat map of the bytes written per PM region).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["by", "sample_interval"])]
    pub svg: Option<PathBuf>,
    /// Also write the profile and those plots as one self-contained HTML page.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["by", "sample_interval"])]
    pub html: Option<PathBuf>,
    /// Split the figures per process (and thread) or per function.
    #[arg(long, value_enum)]
    pub by: Option<ByArg>,
    /// Simulate PEBS sampling every N-th store and compare its estimate with the exact
    /// bytes (N >= 1; the dissertation used primes such as 10007).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_interval: Option<u64>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ByArg {
    Process,
    Function,
}

impl From<ByArg> for By {
    fn from(by: ByArg) -> By {
        match by {
            ByArg::Process => By::Process,
            ByArg::Function => By::Function,
        }
    }
}

pub fn run(args: &ProfileArgs) -> Result<()> {
    let trace = RunDir::trace_of(&args.trace);
    if args.by.is_some() || args.sample_interval.is_some() {
        let reader = Reader::open(&trace)?;
        let threads = reader.header().flags & Header::FLAG_TASKS != 0;
        let accounting = account(
            reader.read_ahead(),
            threads,
            args.by.map(By::from),
            args.sample_interval,
            Symbols::of_trace(&trace).as_ref(),
        )?;
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&accounting)?)?;
        } else {
            out!("{}", accounting.to_text())?;
        }
        return Ok(());
    }
    let profile = profile(
        Reader::open(&trace)?.read_ahead(),
        Symbols::of_trace(&trace).as_ref(),
    )?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&profile)?)?;
    } else {
        out!("{}", profile.to_text())?;
    }
    if args.svg.is_none() && args.html.is_none() {
        return Ok(());
    }
    let svgs = profile_svgs(&profile).map_err(anyhow::Error::msg)?;
    if let Some(file) = &args.html {
        let title = format!("PM profile of {}", trace.display());
        html::write(file, &html::plots_page(&title, &profile.to_text(), &svgs))?;
    }
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, svg) in svgs {
            let path = dir.join(name);
            write_atomically(&path, svg.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            say!("plot: {}", path.display());
        }
    }
    Ok(())
}
