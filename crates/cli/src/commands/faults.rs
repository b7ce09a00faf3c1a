//! `persim faults`: media faults and scribbles injected into a finished run's PM images,
//! each corrupted image recovered in the guest and judged (docs/guides/faults.md).

use crate::progress::Progress;
use crate::size::parse_size;
use crate::vm_args::VmArgs;
use anyhow::{bail, Result};
use clap::Args;
use persim_image::FaultKind;
use persim_inspect::DEFAULT_DATA_WRITERS;
use persim_tester::{run_faults, FaultOptions, FaultPlace, FaultsAt, RunDir, TestCase, VmGuest};
use std::ops::Range;
use std::path::PathBuf;

/// Inject media faults and scribbles into a finished run's PM images and judge recovery.
///
/// Makes corrupted copies of the run's images (by default the final state's: every store
/// of the trace persisted), recovers each in the VM exactly as a crash image is recovered,
/// and classifies each fault against the uncorrupted image's state: masked (the same
/// state), detected (recovery or the state command failed: a failed mount, a checksum
/// error, a non-zero exit), silent (recovery succeeded, the state differs) or crash (oops,
/// panic, hang). Silent and crash faults are findings: exit code 1, each printed with
/// where it hit, the code that last wrote those bytes, and the state diff.
///
/// QEMU's NVDIMM has no poison: a zeroed range stands for a lost page (docs/guides/faults.md).
/// The run directory is only read; results go to --out (default RUN_DIR/faults), where the
/// same command resumes an interrupted campaign. `persim report OUT --html FILE` shows them
/// as one self-contained page (the table, its plot and each finding).
#[derive(Args, Debug)]
pub struct FaultsArgs {
    /// A run directory of `persim run` (its trace, test and states).
    pub run_dir: PathBuf,
    /// The configuration the run was made on; default: the configuration file the run was
    /// made with (`persim run --vm FILE`), else the one of its name among Persim's
    /// (vm/<name>.toml). A machine that recovers otherwise (another configuration, kernel
    /// or guest tools) is refused.
    #[command(flatten)]
    pub vm: VmArgs,
    /// Fault kinds (repeat or separate with commas): bitflip (one bit), scribble:N (N
    /// random bytes), zero:N (N bytes zeroed), page (the 4 KiB page zeroed: a lost page).
    #[arg(
        long = "kind",
        value_delimiter = ',',
        default_value = "bitflip",
        value_name = "KIND"
    )]
    pub kinds: Vec<FaultKind>,
    /// Where faults land (repeat or separate with commas): written (bytes the test
    /// wrote), metadata / data (of those, split by the code that wrote them: data is what
    /// the kernel's DAX copy wrote, or the VM configuration's fault_data_writers), any
    /// (anywhere in PM).
    #[arg(
        long = "where",
        value_delimiter = ',',
        default_value = "written",
        value_name = "WHERE"
    )]
    pub places: Vec<FaultPlace>,
    /// Only PM bytes OFFSET..OFFSET+LEN (sizes as 0x1000, 4096 or 4K): with --where any,
    /// that range; with the others, their bytes in it. Aims faults at a structure written
    /// before the trace began, such as a PMDK pool's header written in the test's setup
    /// (`grep -obUa PMEMOBJ RUN_DIR/trace.ptrace.initial`; docs/guides/faults.md).
    #[arg(long, value_name = "OFFSET:LEN", value_parser = parse_range)]
    pub range: Option<Range<u64>>,
    /// Faults per kind, place and image (fewer when the place holds fewer distinct ones).
    #[arg(long, default_value_t = 20)]
    pub count: usize,
    /// Seed of the faults' places and bytes: the same seed gives the same faults.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Which images: final (the trace's end, every store persisted), each-checkpoint (the
    /// fully persisted image at each checkpoint, and the final one), failure-points (the
    /// run's crash images: a torn state and a fault at once).
    #[arg(long, default_value = "final")]
    pub at: FaultsAt,
    /// The campaign's directory (created; an existing one is resumed).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print faults.json (every fault and the summary) instead of the text.
    #[arg(long)]
    pub json: bool,
    /// Images recovered in parallel (one VM each); default: the number of cores.
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `OFFSET:LEN` as a range of PM offsets.
fn parse_range(text: &str) -> Result<Range<u64>, String> {
    let (offset, len) = text
        .split_once(':')
        .ok_or_else(|| format!("'{text}' is not OFFSET:LEN (example: 0x200000:4K)"))?;
    let (offset, len) = (parse_size(offset)?, parse_size(len)?);
    let end = offset
        .checked_add(len)
        .ok_or_else(|| format!("'{text}' ends beyond 2^64"))?;
    if len == 0 {
        return Err(format!("'{text}' is empty: give a LEN above 0"));
    }
    Ok(offset..end)
}

/// Returns whether a fault was silent or crashed the guest.
pub fn run(args: &FaultsArgs) -> Result<bool> {
    let run = RunDir::new(&args.run_dir);
    let Some(inputs) = run.read_inputs()? else {
        bail!(
            "{} is not a run directory of `persim run` (no inputs.json): give one",
            args.run_dir.display()
        );
    };
    let test = TestCase::load(&run.test())?;
    let machine = args.vm.machine_of_run(
        &inputs.machine,
        inputs.config_file.as_deref(),
        args.jobs,
        !args.quiet,
    )?;
    let data_writers = match machine.config.fault_data_writers.is_empty() {
        true => DEFAULT_DATA_WRITERS.iter().map(|w| w.to_string()).collect(),
        false => machine.config.fault_data_writers.clone(),
    };
    let guest = VmGuest::new(machine);
    inputs.check_recovery_on(&guest, run.root())?;
    let out = args.out.clone().unwrap_or_else(|| run.faults());
    // Locks the campaign's directory, as a run directory's.
    let locked = RunDir::create(&out)?;
    let opts = FaultOptions {
        kinds: args.kinds.clone(),
        places: args.places.clone(),
        count: args.count,
        seed: args.seed,
        at: args.at,
        range: args.range.clone(),
        data_writers,
    };
    let mut progress = Progress::new(format!("persim faults {}", inputs.test), !args.quiet);
    let report = run_faults(&run, &test, &guest, &opts, locked.root(), &mut progress)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", report.to_text())?;
        outln!(
            "results: {} (faults.json, summary.txt, summary.svg)",
            out.display()
        )?;
    }
    let found = report.findings().next().is_some();
    Ok(found)
}
