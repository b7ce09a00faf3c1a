//! `persim`: find crash-consistency bugs in persistent-memory software.

mod images;
mod progress;
mod record;
mod size;
mod trace_cmd;
mod vm_args;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit code when the tool itself failed (bad input, I/O error).
const EXIT_TOOL_FAILED: u8 = 2;

#[derive(Parser)]
#[command(
    name = "persim",
    version,
    about = "Crash-consistency testing for persistent-memory software",
    long_about = "Persim records what software does to persistent memory (PM), replays the \
                  trace through a crash model and produces every PM content a crash could \
                  leave, so that recovery can be checked on each.\n\n\
                  Typical first steps:\n  \
                  persim images examples/journal.trace          # crash images of a trace\n  \
                  persim trace print examples/journal.trace     # a trace as text\n\n\
                  Traces are text (see shared TRACE-TEXT format) or Persim's compressed binary \
                  form; every command accepts both."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Images(images::ImagesArgs),
    Trace(TraceArgs),
}

/// Record a trace in the VM, or inspect and convert traces.
///
/// Recording: `persim trace --fs ext4 --cmd 'echo HelloWorld > myfile' -o hello.ptrace`
/// boots the VM, creates and mounts the file system with DAX, and traces the commands.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct TraceArgs {
    #[command(subcommand)]
    command: Option<trace_cmd::TraceCommand>,
    #[command(flatten)]
    record: record::RecordArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Images(args) => images::run(&args),
        Command::Trace(TraceArgs {
            command: Some(command),
            ..
        }) => trace_cmd::run(&command),
        Command::Trace(TraceArgs { record, .. }) => record::run(&record),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("persim: error: {e:#}");
            ExitCode::from(EXIT_TOOL_FAILED)
        }
    }
}

/// A reader of our output (e.g. `head`) went away: not an error of ours.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
