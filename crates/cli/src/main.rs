//! `persim`: find crash-consistency bugs in persistent-memory software.

/// Output on stdout: like `print!`, but a write error (a reader such as `head` that went
/// away) is returned, and `main` ends quietly on a closed pipe instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => { std::io::Write::write_fmt(&mut std::io::stdout(), format_args!($($arg)*)) };
}

/// `out!` with a newline.
macro_rules! outln {
    ($($arg:tt)*) => { out!("{}\n", format_args!($($arg)*)) };
}

/// Progress and diagnostics on stderr: like `eprintln!`, but a closed stderr is ignored,
/// so the work goes on (`persim run … 2>&1 | head -2` finishes the run and its report).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

/// mimalloc instead of glibc's allocator: trace entries are allocated on the decoding
/// thread and freed on the analysing one (`persim_trace::Reader::read_ahead`), which glibc
/// serves slowly (its per-thread arenas); 1.3x faster `persim analyze` (docs/results/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod commands;
mod html;
mod progress;
mod size;
mod vm_args;

use commands::{
    analyze, cache, campaign, conjure, debug, efficiency, faults, generate, images, profile,
    record, report, run, suite, trace,
};

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit code when a test found crash-consistency violations.
const EXIT_VIOLATIONS: u8 = 1;
/// Exit code when the tool itself failed (bad input, I/O error).
const EXIT_TOOL_FAILED: u8 = 2;

#[derive(Parser)]
#[command(
    name = "persim",
    version,
    about = "Crash-consistency testing for persistent-memory software",
    long_about = "Persim records what software does to persistent memory (PM) in a QEMU VM, \
                  replays the trace through a crash model, recovers every PM content a crash \
                  could leave, and reports each checkpoint interval whose crash states are not \
                  atomic.\n\n\
                  Typical first steps:\n  \
                  persim run --fs ext4 --test hello-world --out runs/hello   # one test, end to end\n  \
                  persim suite fs --fs ext4 --out runs/ext4                  # the file-system suite\n  \
                  persim report runs/hello --diff                            # evidence of a violation\n  \
                  persim images examples/journal-missing-fence.trace         # crash images of a trace\n  \
                  persim analyze examples/journal-missing-fence.trace        # bug patterns of a trace\n\n\
                  Traces are text (docs/reference/trace-format.md) or Persim's compressed binary \
                  form; every command accepts both. Exit codes: 0 no violation, 1 violations \
                  found, 2 the tool failed."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Run(run::RunArgs),
    Suite(suite::SuiteArgs),
    Campaign(campaign::CampaignArgs),
    Report(report::ReportArgs),
    Images(images::ImagesArgs),
    Faults(faults::FaultsArgs),
    Analyze(analyze::AnalyzeArgs),
    Conjure(conjure::ConjureArgs),
    Profile(profile::ProfileArgs),
    Trace(TraceArgs),
    Cache(cache::CacheArgs),
    /// Look into a run's trace through the crash model.
    Debug {
        #[command(subcommand)]
        command: debug::DebugCommand,
    },
    /// Measure CPU and energy cost per GiB written with fio (docs/guides/efficiency.md).
    Efficiency {
        #[command(subcommand)]
        command: efficiency::EfficiencyCommand,
    },
    /// Generate tests (a suite directory for `persim suite DIR`).
    Generate {
        #[command(subcommand)]
        command: generate::GenerateCommand,
    },
}

/// Record a trace in the VM, or inspect and convert traces.
///
/// Recording: `persim trace --fs ext4 --cmd 'echo HelloWorld > myfile' -o hello.ptrace`
/// boots the VM, creates and mounts the file system with DAX, and traces the commands.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct TraceArgs {
    #[command(subcommand)]
    command: Option<trace::TraceCommand>,
    #[command(flatten)]
    record: record::RecordArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(&args).map(violations),
        Command::Suite(args) => suite::run(&args).map(violations),
        Command::Campaign(args) => campaign::run(&args).map(violations),
        Command::Report(args) => report::run(&args).map(violations),
        Command::Debug { command } => debug::run(&command).map(|()| ExitCode::SUCCESS),
        Command::Efficiency { command } => efficiency::run(&command),
        Command::Generate { command } => generate::run(&command).map(|()| ExitCode::SUCCESS),
        Command::Images(args) => images::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Faults(args) => faults::run(&args).map(violations),
        Command::Analyze(args) => analyze::run(&args).map(violations),
        Command::Conjure(args) => conjure::run(&args).map(violations),
        Command::Profile(args) => profile::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Cache(args) => cache::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Trace(TraceArgs {
            command: Some(command),
            ..
        }) => trace::run(&command).map(|()| ExitCode::SUCCESS),
        Command::Trace(TraceArgs { record, .. }) => {
            record::run(&record).map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            say!("persim: error: {e:#}");
            ExitCode::from(EXIT_TOOL_FAILED)
        }
    }
}

fn violations(found: bool) -> ExitCode {
    if found {
        ExitCode::from(EXIT_VIOLATIONS)
    } else {
        ExitCode::SUCCESS
    }
}

/// A reader of our output (e.g. `head`) went away: not an error of ours.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
