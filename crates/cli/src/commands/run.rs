//! `persim run`: one test through the whole pipeline into a run directory.

use crate::progress::Progress;
use crate::vm_args::VmArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use persim_model::{CacheMode, Config, Scope, Strategy};
use persim_tester::{run_test, NtPrefixes, PipelineOptions, RunDir, Suite, TestCase, VmGuest};
use persim_vm::Stacks;

/// Options shared by `persim run` and `persim suite`.
#[derive(Args, Debug, Clone)]
pub struct PipelineArgs {
    #[command(flatten)]
    pub vm: VmArgs,
    /// Whether CPU caches are lost on a crash (volatile) or survive it (persistent, eADR).
    #[arg(long, default_value = "volatile")]
    pub cache: CacheMode,
    /// Which crash images to check: program-order is cheap and finds logic bugs, not
    /// ordering bugs; global-prefix, reads and exhaustive find those too, at a higher cost;
    /// fast is cheapest. --help says what each cannot find.
    #[arg(long, default_value = "program-order", long_help = super::STRATEGIES)]
    pub strategy: Strategy,
    /// Record no stack traces. By default every entry gets its call chain (shadow call
    /// stacks: about 1.2-1.3x the cost of tracing the operations, which take well under a
    /// second in most tests), so reports name the callers of the code behind each
    /// violation; `fast` needs them.
    #[arg(long)]
    pub no_stack_traces: bool,
    /// Record calls of these functions (`pmdk`: PMDK's); see --help.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', long_help = super::TRACE_CALLS)]
    pub trace_calls: Vec<String>,
    /// With --strategy reads, where a line's NT stores also persist as program-order
    /// prefixes (otherwise all or nothing): auto, at the failure points where some state
    /// arises only from images with NT stores (then judged again); off; all.
    #[arg(long, default_value = "auto", value_name = "auto|off|all")]
    pub nt_prefixes: NtPrefixes,
    /// With --strategy reads, global-prefix or single-line, which dirty lines are explored:
    /// program, only those that can change what the software under test recovers to - once
    /// the traced program has accessed PM from user space (a PM program's pool), the lines
    /// of the pages it accessed, the kernel's others following the cut; of ext4 with its
    /// jbd2 journal in PM, or of XFS (v5) with its log, the lines the journal or log does not
    /// protect while its ordering rules hold, and of a libpmemobj pool, the lines its
    /// transaction logs do not restore; of an OpenZFS pool on the block device, no block
    /// write that no uberblock references yet (a broken rule is reported and stops the
    /// pruning); all, every dirty line.
    #[arg(long, default_value = "program", value_name = "program|all")]
    pub scope: Scope,
    /// Images per failure point above which a seeded sample is taken.
    #[arg(long, default_value_t = Config::DEFAULT_MAX_IMAGES)]
    pub max_images: usize,
    /// Crash images recovered in parallel (one VM each); default: the number of cores.
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Start over in a run directory that holds a run of another test, machine or
    /// version (by default Persim refuses; other strategies or cache modes only redo the
    /// images and what follows).
    #[arg(long)]
    pub force: bool,
    /// Keep every crash image in DIR/images after its state is extracted (by default it is
    /// deleted, as `persim debug image` makes it again from the trace).
    #[arg(long)]
    pub keep_images: bool,
    /// Compare each interval's final states with the state the same setup and operations
    /// leave, without a crash, on this configuration: a VM configuration file, or a file
    /// system as --fs names it (e.g. vm/xfs-dax.toml, or xfs). A difference is a
    /// violation, "final state differs from reference" (exit code 1). Times, inode numbers,
    /// block counts and directories' sizes and link counts are left out of the comparison,
    /// as are the test's `ignore` fields (docs/design/tester.md, "Is the final state right?").
    #[arg(long, value_name = "CONFIG")]
    pub reference: Option<String>,
}

impl From<&PipelineArgs> for PipelineOptions {
    fn from(p: &PipelineArgs) -> Self {
        PipelineOptions {
            cache: p.cache,
            strategy: p.strategy,
            max_images: p.max_images,
            nt_prefixes: p.nt_prefixes,
            scope: p.scope,
            force: p.force,
            keep_images: p.keep_images,
        }
    }
}

impl PipelineArgs {
    pub fn guest(&self) -> Result<VmGuest> {
        if self.no_stack_traces && self.strategy == Strategy::Fast {
            bail!("--strategy fast tells failure points apart by their stacks: leave out --no-stack-traces");
        }
        let mut guest = VmGuest::new(self.vm.machine(self.jobs, !self.quiet)?);
        if !self.no_stack_traces {
            guest.record.stack_traces = Stacks::Shadow;
        }
        guest.record.trace_calls = self.trace_calls.clone();
        if let Some(reference) = &self.reference {
            let machine = self.vm.reference_machine(reference, !self.quiet)?;
            guest.reference = Some(Box::new(VmGuest::new(machine)));
        }
        Ok(guest)
    }
}

/// Run one test: trace it in the VM, generate its crash images, recover each, and judge
/// every checkpoint interval. Exit code 0: no violation, 1: violations (or a traced run that
/// wrote nothing to PM or the disk), 2: the tool failed.
///
/// The run directory keeps every stage's output (trace.ptrace, images.json, images/,
/// states/, report.json, report.txt); a stage whose output exists is reused, so an
/// interrupted run resumes.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// A test name from suites/fs (e.g. hello-world), SUITE/NAME for another suite (e.g.
    /// ringbuf/append), or a test file.
    #[arg(long, required_unless_present = "trace_from")]
    pub test: Option<String>,
    /// Judge the execution recorded in another run directory again (e.g. with another
    /// --strategy or --cache) without running it again: its trace, test and known states
    /// start the new run directory --out. Give the same --fs/--vm.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "test")]
    pub trace_from: Option<std::path::PathBuf>,
    /// The run directory (created; an existing one is resumed).
    #[arg(long, value_name = "DIR")]
    pub out: std::path::PathBuf,
    /// Record so that another run gives the same trace, byte for byte, and so the same
    /// images, states and report: the guest's time counts instructions (QEMU `-icount`)
    /// and nothing from outside reaches it while it runs the test (docs/design/tracer.md,
    /// "Reproducibility"). The traced run takes about 1.2x as long.
    #[arg(long)]
    pub reproducible: bool,
}

/// Returns whether violations were found.
pub fn run(args: &RunArgs) -> Result<bool> {
    let p = &args.pipeline;
    // A bad test or configuration is refused before the run directory exists: nothing is
    // left behind.
    let given = match &args.test {
        Some(test) => {
            let (name, path) = Suite::resolve(&p.vm.home()?, test)?;
            Some((name, TestCase::load(&path)?))
        }
        None => None,
    };
    let mut guest = p.guest()?;
    let dir = RunDir::create(&args.out)?;
    guest.record.reproducible = args.reproducible;
    let (name, test) = match (given, &args.trace_from) {
        (Some(given), _) => given,
        (None, Some(source)) => {
            let source = RunDir::new(source);
            dir.adopt_trace_from(&source)?;
            let inputs = dir
                .read_inputs()?
                .context("the adopted run has no inputs")?;
            (inputs.test, TestCase::load(&dir.test())?)
        }
        (None, None) => bail!("give --test (or --trace-from RUN_DIR)"),
    };
    let mut progress = Progress::new(format!("persim run {name}"), !p.quiet);
    if !p.quiet {
        say!("persim run {name}: {}", test.description);
    }
    let report = run_test(&p.into(), &guest, &name, &test, &dir, &mut progress)?;
    out!("{}", report.to_text())?;
    outln!(
        "run directory: {} (persim report {0} --diff)",
        args.out.display()
    )?;
    Ok(!report.passed())
}
