//! `persim profile TRACE|RUN_DIR`: how a trace uses PM.

use anyhow::Result;
use clap::Args;
use persim_analyze::profile;
use persim_tester::RunDir;
use persim_trace::Reader;
use std::path::PathBuf;

/// Profile how a trace uses PM, per checkpoint interval and for the whole trace.
///
/// Columns: entries; bytes stored; NT, the share of bytes stored non-temporally; flushes and
/// fences per KiB stored; ampl., the write amplification if every fence epoch wrote whole
/// 256-byte XPLines (XPLine bytes touched / bytes stored); partial XPL, XPLines an epoch
/// wrote only partly (read-modify-write on the media); ISAD, the share of accesses not
/// contiguous with the previous one (0 sequential, 1 random); reads, when traced with
/// --reads. Then stores by size and flushes and fences by kind. docs/analysis.md defines
/// each figure.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ProfileArgs {
    /// A trace file (text or binary), or a run directory.
    pub trace: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ProfileArgs) -> Result<()> {
    let profile = profile(Reader::open(&RunDir::trace_of(&args.trace))?)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&profile)?)?;
    } else {
        out!("{}", profile.to_text())?;
    }
    Ok(())
}
