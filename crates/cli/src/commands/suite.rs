//! `persim suite fs --fs ext4 --out DIR`: every test of a suite, and a results table.

use crate::commands::run::PipelineArgs;
use crate::progress::Progress;
use anyhow::Result;
use clap::Args;
use persim_tester::{run_campaign, CampaignOptions, RunDir, Suite, TestEvent};
use std::path::PathBuf;

/// Run every test of a suite (each as `persim run` would, into DIR/<test>) and print a
/// results table: ✓ atomic, A atomicity violation, I broken invariant, R final state
/// differs from the reference's (--reference) or the test's `expect`, S multiple final
/// states, E state extraction error, H recovery hang, C recovery crash, ! the test could
/// not be run. The
/// VMs boot once for all tests. For thousands of tests, several at once, or shards, see
/// `persim campaign`.
#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// The suite: a directory under suites/ (fs, ringbuf), or a directory of test files
    /// (e.g. from `persim generate ace`).
    pub suite: String,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Where the runs and results.json / results.txt go (an existing one is resumed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Returns whether any test found violations or could not be run.
pub fn run(args: &SuiteArgs) -> Result<bool> {
    let p = &args.pipeline;
    // A bad configuration is refused before --out exists; an unusable --out is found
    // before any VM runs.
    let guest = p.guest()?;
    RunDir::create(&args.out)?;
    let suite = Suite::named_or_dir(&p.vm.home()?, &args.suite);
    let mut progress = Progress::new("persim suite", !p.quiet);
    let results = run_campaign(
        &p.into(),
        &guest,
        &suite,
        &args.out,
        CampaignOptions::default(),
        |event| {
            if let TestEvent::Started {
                name,
                position,
                total,
            } = event
            {
                say!("persim suite: [{}/{total}] {name}", position + 1);
            }
        },
        &mut progress,
    )?;
    out!("{}", results.to_text())?;
    Ok(results.failed())
}
