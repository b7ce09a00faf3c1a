//! `persim profile TRACE|RUN_DIR`: how a trace uses PM.

use anyhow::{Context, Result};
use clap::Args;
use persim_analyze::{profile, profile_svgs};
use persim_tester::RunDir;
use persim_trace::atomic_file::write_atomically;
use persim_trace::{Reader, Symbols};
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
/// pc. docs/analysis.md defines each figure.
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
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
}

pub fn run(args: &ProfileArgs) -> Result<()> {
    let trace = RunDir::trace_of(&args.trace);
    let profile = profile(
        Reader::open(&trace)?.read_ahead(),
        Symbols::of_trace(&trace).as_ref(),
    )?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&profile)?)?;
    } else {
        out!("{}", profile.to_text())?;
    }
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, svg) in profile_svgs(&profile).map_err(anyhow::Error::msg)? {
            let path = dir.join(name);
            write_atomically(&path, svg.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            say!("plot: {}", path.display());
        }
    }
    Ok(())
}
