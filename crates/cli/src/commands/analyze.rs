//! `persim analyze TRACE|RUN_DIR`: persistency-bug patterns of a trace, in one pass.

use anyhow::Result;
use clap::Args;
use persim_inspect::{find_patterns, Owner, PatternKind};
use persim_model::CacheMode;
use persim_tester::RunDir;
use persim_trace::{Reader, Symbols};
use std::path::PathBuf;

/// Find persistency-bug patterns in a trace, in seconds and before any crash image is made
///
/// Patterns (docs/design/analysis.md has the exact rules):
///   missing-persist        stored bytes not flushed and fenced at a checkpoint, at
///                          `success` or at the end of the trace (a likely bug)
///   overwrite-unpersisted  a store over bytes whose previous store never became durable
///   flush-unwritten        a flush of a line no store in the trace wrote
///   redundant-flush        a flush with nothing of the line's own to write back
///   redundant-fence        a fence with no store or flush since the previous one
///   unordered-flushes      several lines flushed between two fences (a hint)
///
/// PMDK's rules, on the library calls of a trace recorded with --trace-calls pmdk:
///   tx-unlogged-store      a store in a transaction to bytes it never added
///                          (pmemobj_tx_add_range is missing)
///   flush-not-pm           pmem_persist/pmemobj_persist of an address outside PM
///   persist-short          stored bytes of a line that a persist call covered only
///                          in part (its size is too small)
///   tx-uninitialised-alloc bytes of an object allocated in a transaction never stored
///                          before its commit (or use pmemobj_tx_zalloc)
///   use-after-free         a load (traces with --reads) or store to an object that a
///                          committed transaction freed
///   tx-overlapping-add     two threads' open transactions adding the same bytes (needs
///                          the trace's thread ids)
///   tx-duplicate-add       an add of bytes the transaction added already (performance)
///
/// With call entries, a program's pmem_persist/pmemobj_persist of lines it did not store
/// to since their last flush is a redundant-flush at its call site, and a pmem_drain with
/// nothing to wait for a redundant-fence.
///
/// Each finding names its trace entry (see `persim debug lines|at`), address and cache
/// line, and the program counter behind it; findings are counted per call site.
/// Findings are ranked by whose code they are in (the trace's symbols say): the
/// program's first and in full, then PMDK's libraries' and the kernel's, each summarised
/// unless --code names it.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct AnalyzeArgs {
    /// A trace file (text or binary), or a run directory (its trace and cache mode).
    pub trace: PathBuf,
    /// The cache mode stores become durable in [default: the run directory's, else volatile].
    #[arg(long)]
    pub cache: Option<CacheMode>,
    /// Exit with 1 if any finding in the code judged (--code) is of one of these kinds
    /// (comma-separated), for CI.
    #[arg(long, value_delimiter = ',')]
    pub fail_on: Vec<PatternKind>,
    /// Whose code is judged: shown in full and counted by --fail-on (comma-separated:
    /// program, library, kernel). Code of no recorded pc always is. For a file system's
    /// trace: --code kernel.
    #[arg(long, value_delimiter = ',', default_value = "program")]
    pub code: Vec<Owner>,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Returns whether a finding of a `--fail-on` kind was found.
pub fn run(args: &AnalyzeArgs) -> Result<bool> {
    let cache = match args.cache {
        Some(cache) => cache,
        None => RunDir::recorded_cache(&args.trace)?,
    };
    let trace = RunDir::trace_of(&args.trace);
    let symbols = Symbols::of_trace(&trace);
    let patterns = find_patterns(Reader::open(&trace)?.read_ahead(), cache, symbols.as_ref())?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&patterns)?)?;
    } else {
        out!("{}", patterns.to_text(symbols.as_ref(), &args.code))?;
    }
    let found = |kind| patterns.count_in(kind, &args.code) > 0;
    Ok(args.fail_on.iter().copied().any(found))
}
