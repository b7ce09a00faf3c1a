//! `persim trace --fs ext4 --cmd '...' -o TRACE`: record a trace in the VM.

use crate::vm_args::VmArgs;
use anyhow::{bail, Result};
use clap::Args;
use persim_tester::{Guest, VmGuest};
use persim_vm::{RecordOptions, Stacks};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RecordArgs {
    #[command(flatten)]
    pub vm: VmArgs,
    /// Shell commands to trace, run in the guest in /mnt (the mounted file system) between
    /// `hypercall start` and `hypercall success` (or `fail` on a non-zero exit). Use
    /// `hypercall checkpoint N` between operations.
    #[arg(long, required = true)]
    pub cmd: Option<String>,
    /// Shell commands run untraced after mkfs and mount, before the traced ones (e.g. to
    /// create the files they work on).
    #[arg(long, default_value = "")]
    pub setup: String,
    /// Where to write the binary trace.
    #[arg(short, long, required = true)]
    pub out: Option<PathBuf>,
    /// Record loads too.
    #[arg(long)]
    pub reads: bool,
    /// Attach a stack trace (return addresses, innermost first) to every entry: `shadow`
    /// (the default) follows the executed calls and returns, so it works on code without
    /// frame pointers such as the Debian kernel; `frame-pointers` walks the rbp chain (only
    /// code built with frame pointers; a cross-check).
    #[arg(long, value_name = "HOW", num_args = 0..=1, default_missing_value = "shadow",
          value_parser = parse_stacks)]
    pub stack_traces: Option<Stacks>,
    /// Record calls of these functions (`pmdk`: PMDK's); see --help.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', long_help = super::TRACE_CALLS)]
    pub trace_calls: Vec<String>,
    /// Record so that another run gives the same trace, byte for byte (see `persim run
    /// --reproducible`).
    #[arg(long)]
    pub reproducible: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: &RecordArgs) -> Result<()> {
    let (Some(command), Some(out)) = (&args.cmd, &args.out) else {
        bail!("give the commands to trace (--cmd) and the output file (-o)");
    };
    let mut guest = VmGuest::new(args.vm.machine(None, !args.quiet)?);
    guest.record = RecordOptions {
        reads: args.reads,
        stack_traces: args.stack_traces.unwrap_or(Stacks::Off),
        reproducible: args.reproducible,
        trace_calls: args.trace_calls.clone(),
        ..RecordOptions::default()
    };
    let summary = guest.record(&args.setup, command, out)?;
    out!("{}", summary.output)?;
    for error in &summary.kernel_errors {
        say!("persim trace: kernel: {error}");
    }
    say!(
        "persim trace: {} written (boot {:.1} s, setup {:.1} s, traced run {:.1} s); the commands exited with {}",
        out.display(),
        summary.boot.as_secs_f64(),
        summary.setup.as_secs_f64(),
        summary.traced.as_secs_f64(),
        summary.exit_code
    );
    if summary.exit_code != 0 {
        bail!(
            "the traced commands failed with exit code {}",
            summary.exit_code
        );
    }
    Ok(())
}

fn parse_stacks(name: &str) -> Result<Stacks, String> {
    Stacks::from_name(name)
        .filter(|s| s.on())
        .ok_or_else(|| format!("`{name}`: give shadow or frame-pointers"))
}
