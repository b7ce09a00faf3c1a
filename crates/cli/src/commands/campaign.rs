//! `persim campaign run DIR --fs ext4 --out C` and `persim campaign merge`: thousands of
//! generated tests on warm VMs, several at once, in shards, grouped by signature.

use crate::commands::run::PipelineArgs;
use crate::html;
use anyhow::Result;
use clap::{Args, Subcommand};
use persim_tester::{
    merge, run_campaign, CampaignOptions, RunDir, Shard, Suite, SuiteResults, TestEvent,
};
use std::path::PathBuf;

/// Run a directory of tests as a campaign (e.g. `persim generate ace --seq 2`), or merge
/// the results of its shards. See docs/guides/campaigns.md.
#[derive(Args, Debug)]
pub struct CampaignArgs {
    #[command(subcommand)]
    pub command: CampaignCommand,
}

#[derive(Subcommand, Debug)]
pub enum CampaignCommand {
    Run(Box<RunCampaignArgs>),
    Merge(MergeArgs),
}

/// Run every test of a directory (or a shard of them) into OUT/<test>, on VMs booted once,
/// PARALLEL tests at once, with a progress line and, at the end, the failing tests grouped
/// by signature (kind of violation, what differs between the states, the function
/// behind it). Started again with the same OUT, it resumes where it stopped. Exit code 1
/// when some test failed.
#[derive(Args, Debug)]
pub struct RunCampaignArgs {
    /// A directory of test files, or a suite under suites/.
    pub tests: String,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Tests run at once (default: -j, so `-j N` sizes the whole job pool): while one
    /// test's crash images are recovered, the next is traced. Each traces in a VM of its
    /// own; -j sets the recovery VMs all tests share.
    #[arg(long)]
    pub parallel: Option<usize>,
    /// Run part K of N (the tests at positions K-1, K-1+N, … of the sorted names), e.g.
    /// one job of a CI matrix; `persim campaign merge` combines the parts. `auto`: the
    /// part a cluster scheduler gives this task: a Slurm job array's task
    /// (SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT; scripts/slurm/campaign.sbatch), or
    /// with `auto/N` a Kubernetes Indexed Job's pod (JOB_COMPLETION_INDEX of N
    /// completions). Give each part its own --out: a task run again (a node lost, the job
    /// requeued) resumes its part there. See docs/guides/campaigns.md.
    #[arg(long, value_name = "K/N|auto[/N]")]
    pub shard: Option<ShardArg>,
    /// Where the runs and results.json / results.txt go (an existing one is resumed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Combine the results of a campaign's shards into one results.json / results.txt (the
/// runs stay in the shards' directories).
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' output directories.
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also write the merged campaign as one self-contained HTML page (`persim report
    /// --html`), each failing test's run report taken from its shard's directory.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Returns whether any test found violations or could not be run.
pub fn run(args: &CampaignArgs) -> Result<bool> {
    match &args.command {
        CampaignCommand::Run(args) => run_tests(args),
        CampaignCommand::Merge(args) => {
            let parts = args
                .shards
                .iter()
                .map(|dir| SuiteResults::load(dir))
                .collect::<Result<Vec<_>>>()?;
            let merged = merge(parts)?;
            merged.save(&args.out)?;
            if let Some(file) = &args.html {
                let run_dir = |test: &str| {
                    (args.shards.iter())
                        .map(|shard| RunDir::new(shard.join(test)))
                        .find(|dir| dir.report_json().exists())
                };
                html::write(file, &html::campaign_page(&merged, run_dir)?)?;
            }
            out!("{}", merged.to_text())?;
            Ok(merged.failed())
        }
    }
}

/// `--shard`: a part given, or the scheduler's.
#[derive(Clone, Copy, Debug)]
pub enum ShardArg {
    Given(Shard),
    /// From the environment, with the count when given (`auto/N`).
    Auto(Option<usize>),
}

impl std::str::FromStr for ShardArg {
    type Err = String;

    fn from_str(text: &str) -> Result<ShardArg, String> {
        match text.strip_prefix("auto") {
            Some("") => Ok(ShardArg::Auto(None)),
            Some(count) => match count.strip_prefix('/').and_then(|n| n.parse().ok()) {
                Some(n) if n >= 1 => Ok(ShardArg::Auto(Some(n))),
                _ => Err(format!(
                    "`{text}` is not a shard: give auto, or auto/N with N >= 1 the number \
                     of parts"
                )),
            },
            None => text.parse().map(ShardArg::Given),
        }
    }
}

impl ShardArg {
    /// The part this process runs; `auto` reads the scheduler's variables.
    fn shard(self) -> Result<Shard> {
        match self {
            ShardArg::Given(shard) => Ok(shard),
            ShardArg::Auto(count) => Shard::from_scheduler(count, |name| std::env::var(name).ok())
                .map_err(anyhow::Error::msg),
        }
    }
}

fn run_tests(args: &RunCampaignArgs) -> Result<bool> {
    // Before anything is made: a refused --shard auto leaves nothing behind.
    let shard = args.shard.map_or(Ok(Shard::WHOLE), ShardArg::shard)?;
    let p = &args.pipeline;
    let mut guest = p.guest()?;
    let parallel = tests_at_once(args.parallel, guest.machine.jobs)?;
    RunDir::create(&args.out)?;
    // One line per test instead of every VM's phases.
    guest.machine.progress = false;
    if let Some(reference) = &mut guest.reference {
        reference.machine.progress = false;
    }
    let suite = Suite::named_or_dir(&p.vm.home()?, &args.tests);
    let campaign = CampaignOptions {
        parallel,
        shard,
        campaign: true,
    };
    let mut progress = crate::progress::Progress::new("persim campaign", false);
    let results = run_campaign(
        &p.into(),
        &guest,
        &suite,
        &args.out,
        campaign,
        |event| {
            if p.quiet {
                return;
            }
            if let TestEvent::Finished {
                result,
                done,
                total,
                failing,
                left,
            } = event
            {
                let secs = left.as_secs();
                say!(
                    "persim campaign: {done}/{total} tests, {failing} failing, ~{}:{:02} left; {} {} in {:.1} s",
                    secs / 60,
                    secs % 60,
                    result.mark.symbol(),
                    result.test,
                    result.seconds
                );
            }
        },
        &mut progress,
    )?;
    out!("{}", results.to_text())?;
    Ok(results.failed())
}

/// `--parallel`, by default `-j`: one number sizes the whole job pool, so `-j 1` runs one
/// VM at a time (a test's trace, then its recoveries).
fn tests_at_once(parallel: Option<usize>, jobs: usize) -> Result<usize> {
    let n = parallel.unwrap_or(jobs);
    anyhow::ensure!(n >= 1, "--parallel and -j must be at least 1");
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_arguments_are_given_parts_or_auto() {
        let given = |text: &str| match text.parse::<ShardArg>() {
            Ok(ShardArg::Given(shard)) => Some(shard.to_string()),
            _ => None,
        };
        assert_eq!(given("2/8").as_deref(), Some("2/8"));
        assert!(matches!("auto".parse(), Ok(ShardArg::Auto(None))));
        assert!(matches!("auto/4".parse(), Ok(ShardArg::Auto(Some(4)))));
        for bad in ["auto/0", "auto/x", "autos", "0/2"] {
            assert!(bad.parse::<ShardArg>().is_err(), "{bad}");
        }
    }

    #[test]
    fn tests_at_once_follow_jobs_unless_given() {
        assert_eq!(tests_at_once(None, 1).unwrap(), 1);
        assert_eq!(tests_at_once(None, 2).unwrap(), 2);
        assert_eq!(tests_at_once(Some(3), 1).unwrap(), 3);
        assert!(tests_at_once(None, 0).is_err());
        assert!(tests_at_once(Some(0), 2).is_err());
    }
}
