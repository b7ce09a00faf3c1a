//! `persim conjure FILES... [-- CFLAGS]`: PmemConjurer, the PM programming rules checked
//! statically on C sources by a Clang Static Analyzer plugin (docs/design/conjurer.md).

use anyhow::{anyhow, bail, Result};
use clap::Args;
use persim_inspect::conjure::{units, Analyzer, FileReport, RunClass, RunLines};
use persim_inspect::find_patterns;
use persim_tester::{Home, RunDir};
use persim_trace::{Reader, Symbols};
use std::path::{Path, PathBuf};

/// Check PM programming rules statically in C sources, on every path, not just one run's
///
/// Rules (PmemConjurer's, Zhang's dissertation, table 4.1):
///   1   a PM object stored to is flushed (at least partly) before the next fence
///       (pmem_drain, _mm_sfence, the fence of a persist) or the return of the function
///   1a  a flush (pmem_persist, pmemobj_persist, _mm_clwb, ...) targets PM, not the
///       stack, the heap or a global
///   1b  a flush covers at least the size of its target's type
///   2   in a transaction, PM is logged (TX_ADD, pmemobj_tx_add_range) before it is
///       stored to (objects the transaction allocated need not be)
///   3   an object pmemobj_tx_alloc'd is stored to before the commit
///   4   no load or store to an object after the transaction that freed it committed
///
/// PM is what pmemobj_direct (D_RW, D_RO), pmem_map_file and pmem_map return. Each file
/// is analysed on its own (calls into other files are unknown), loops are unrolled a few
/// times, and a function is judged in the callers in this file that reach it.
///
/// With --trace, each finding is checked against a traced run of the same program
/// (recorded with --stack-traces --trace-calls pmdk, --reads for loads, the program
/// built with -g): "witnessed" (the run reached the line and `persim analyze` flagged it
/// by the same rule), "reached, not flagged", or "never reached" (the path needs a
/// workload that runs it).
///
/// Exit codes: 0 nothing found, 1 findings, 2 bad input (a file clang cannot compile,
/// a missing plugin, a trace without source lines).
///
/// Examples:
///   persim conjure hashmap_tx.c -- -I include -std=gnu99
///   persim conjure hashmap_tx.c --trace runs/remove -- -I include -std=gnu99
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ConjureArgs {
    /// C source files (with --compile-commands: those of its entries to analyse; none
    /// for all).
    pub files: Vec<PathBuf>,
    /// Take each file's directory and flags from this compilation database
    /// (compile_commands.json, as CMake or Bear write it).
    #[arg(long, value_name = "FILE")]
    pub compile_commands: Option<PathBuf>,
    /// Compiler flags for the files (include paths, -D, -std), after `--`.
    #[arg(last = true, value_name = "CFLAGS")]
    pub cflags: Vec<String>,
    /// The clang that loads the plugin: clang 16, the one it was built against.
    #[arg(long, default_value = "clang-16")]
    pub clang: PathBuf,
    /// The plugin [default: target/conjurer/pmem-conjurer.so in the source tree,
    /// lib/pmem-conjurer.so in an installation].
    #[arg(long)]
    pub plugin: Option<PathBuf>,
    /// Check each finding against this run of the program: a run directory or a trace
    /// file, with its symbols beside it.
    #[arg(long, value_name = "TRACE|RUN_DIR")]
    pub trace: Option<PathBuf>,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Returns whether any rule was found broken.
pub fn run(args: &ConjureArgs) -> Result<bool> {
    let plugin = match &args.plugin {
        Some(p) => p.clone(),
        None => match Home::locate(None)? {
            Home::SourceTree(dir) => dir.join("target/conjurer/pmem-conjurer.so"),
            Home::Installed(dir) => dir.join("lib/pmem-conjurer.so"),
        },
    };
    let analyzer = Analyzer {
        clang: args.clang.clone(),
        plugin,
    };
    let units = units(&args.files, &args.cflags, args.compile_commands.as_deref())?;
    // The run first: a trace that cannot place findings is refused before clang runs.
    let run = args.trace.as_deref().map(run_lines).transpose()?;
    let mut reports = units
        .iter()
        .map(|u| analyzer.analyze(u))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(run) = &run {
        for f in reports.iter_mut().flat_map(|r| &mut r.findings) {
            f.run = Some(run.check(f));
        }
    }
    let found: usize = reports.iter().map(|r| r.findings.len()).sum();
    let count = |class: RunClass| {
        reports
            .iter()
            .flat_map(|r| &r.findings)
            .filter(|f| f.run.as_ref().is_some_and(|r| r.class == class))
            .count()
    };
    if args.json {
        let mut json = serde_json::json!({ "findings": found, "files": reports });
        if let Some(trace) = &args.trace {
            json["run"] = serde_json::json!({
                "trace": trace,
                "witnessed": count(RunClass::Witnessed),
                "reached_not_flagged": count(RunClass::ReachedNotFlagged),
                "not_reached": count(RunClass::NotReached),
            });
        }
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        let cwd = std::env::current_dir()?;
        for report in &reports {
            out!("{}", text(report, &cwd))?;
        }
        outln!(
            "{found} finding{} in {} file{}",
            if found == 1 { "" } else { "s" },
            reports.len(),
            if reports.len() == 1 { "" } else { "s" }
        )?;
        if let Some(trace) = &args.trace {
            outln!(
                "against {}: {} witnessed, {} reached and not flagged, {} never reached",
                trace.display(),
                count(RunClass::Witnessed),
                count(RunClass::ReachedNotFlagged),
                count(RunClass::NotReached)
            )?;
        }
    }
    Ok(found > 0)
}

/// The source lines a traced run reached and `analyze`'s findings of PMDK's rules in it.
fn run_lines(path: &Path) -> Result<RunLines> {
    let trace = RunDir::trace_of(path);
    if !trace.is_file() {
        bail!(
            "{} is not a trace or a run directory with one: give what `persim trace -o` or \
             `persim run --out` wrote",
            path.display()
        );
    }
    let symbols = Symbols::of_trace(&trace).ok_or_else(|| {
        anyhow!(
            "{} has no symbols beside it: record the run with persim (trace or run), \
             which keeps them",
            trace.display()
        )
    })?;
    let cache = RunDir::recorded_cache(path)?;
    let patterns = find_patterns(Reader::open(&trace)?.read_ahead(), cache, Some(&symbols))?;
    let run = RunLines::of_trace(Reader::open(&trace)?.read_ahead(), &patterns, &symbols)?;
    if run.is_empty() {
        bail!(
            "no entry of {} comes from a source line: record it with --stack-traces \
             --trace-calls pmdk, and build the program with -g",
            trace.display()
        );
    }
    Ok(run)
}

/// A file's findings, each with its path, then how long the file took.
fn text(report: &FileReport, cwd: &Path) -> String {
    let short = |p: &Path| p.strip_prefix(cwd).unwrap_or(p).display().to_string();
    let mut s = String::new();
    for f in &report.findings {
        s += &format!(
            "{}:{}:{}: rule {}: {}\n",
            short(&f.file),
            f.line,
            f.column,
            f.rule,
            f.message
        );
        for step in &f.path {
            let at = if step.file == f.file {
                format!("line {}", step.line)
            } else {
                format!("{}:{}", short(&step.file), step.line)
            };
            s += &format!("    {at}: {}\n", step.message);
        }
        if let Some(run) = &f.run {
            s += &format!("    run: {}", run.class.text());
            if let Some(witness) = &run.witness {
                s += &format!(": {witness}");
            }
            s.push('\n');
        }
    }
    s += &format!(
        "{}: {} finding{}, {:.2} s\n",
        short(&report.file),
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" },
        report.seconds
    );
    s
}
