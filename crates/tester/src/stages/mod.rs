//! One test through every stage into a run directory, one file per stage:
//!
//! ```text
//! record    the traced run                      -> trace.ptrace (+ .initial, .symbols, …)
//! reads     `reads`: fully persisted images' recoveries traced for loads -> reads/
//! images    the crash images                    -> images/, images.json
//! states    each image recovered                -> states/<hash>.json
//! nt        `reads`: where NT prefixes matter   -> nt-prefixes.json (then images, states again)
//! reference `--reference`: the test on the reference configuration, each checkpoint's
//!           state without a crash               -> reference/states.json
//! verdicts  judged, the code behind each violation named -> report.json, report.txt
//! ```
//!
//! Every stage is a function over one [`Run`]; [`Run::stage`] is the one reuse rule (a
//! stage whose output exists is not run again, so an interrupted run resumes), and the
//! products a later stage needs (read sets, the images index) are kept in the `Run`, so a
//! run replays its trace once per pass it needs.

mod images;
mod nt;
mod reads;
mod record;
mod reference;
mod states;
mod traced;
mod verdicts;

pub use images::{generate_options, materialise_images};
pub(crate) use nt::NtDecision;
pub use reads::recorded_guidance;
pub(crate) use states::read_state;
pub use verdicts::judge;

use crate::cases::TestCase;
use crate::guest::Guest;
use crate::inputs::Inputs;
use crate::options::{NtPrefixes, PipelineOptions};
use crate::progress::{Event, Observer, Pass, Stage};
use crate::rundir::RunDir;
use anyhow::{bail, Result};
use persim_analyze::{Report, Timings};
use persim_image::{ImagesIndex, NtPrefixesAt, ReadSets};
use persim_model::Strategy;
use persim_trace::atomic_file::write_atomically;
use std::sync::Arc;
use std::time::Instant;

/// One test's run: what every stage reads, and what the stages made so far.
struct Run<'a> {
    opts: &'a PipelineOptions,
    guest: &'a dyn Guest,
    test: &'a TestCase,
    dir: &'a RunDir,
    observer: &'a mut dyn Observer,
    timings: Timings,
    /// `reads`: the read sets of the fully persisted images, once traced or read back.
    read_sets: Option<Arc<ReadSets>>,
    /// `reads`: the images whose recoveries this run traced, which others may share.
    traced: traced::Traced,
    /// `images.json` of the last images pass, read once.
    index: Option<ImagesIndex>,
}

impl Run<'_> {
    /// The one reuse rule: unless `done` (the stage's output exists from an earlier run),
    /// runs `body`, tells the observer, and returns how long it took.
    fn stage(
        &mut self,
        stage: Stage,
        done: bool,
        body: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<Option<f64>> {
        if done {
            self.observer.event(&Event::Reused(stage));
            return Ok(None);
        }
        let started = Instant::now();
        body(self)?;
        let took = started.elapsed();
        self.observer.event(&Event::Finished(stage, took));
        Ok(Some(took.as_secs_f64()))
    }

    /// Tells the observer that the trace is replayed once more, and why.
    fn replaying(&mut self, pass: Pass) {
        self.observer.event(&Event::Replaying(pass));
    }
}

/// Runs `test` through every stage into `dir` and writes the report there. `dir` comes
/// from [`RunDir::create`], whose lock keeps other processes out while it runs.
pub fn run_test(
    opts: &PipelineOptions,
    guest: &dyn Guest,
    name: &str,
    test: &TestCase,
    dir: &RunDir,
    observer: &mut dyn Observer,
) -> Result<Report> {
    let started = Instant::now();
    let inputs = Inputs {
        recovery_key: crate::inputs::recovery_key(&guest.recovery_identity()),
        config_file: guest.config_file(),
        ..Inputs::of(
            opts,
            name,
            test,
            &guest.identity(),
            guest.reference().map(|r| r.identity()).as_deref(),
        )
    };
    reconcile(dir, &inputs, opts.force)?;
    let mut run = Run {
        opts,
        guest,
        test,
        dir,
        observer,
        timings: Timings::default(),
        read_sets: None,
        traced: traced::Traced::default(),
        index: None,
    };
    run.timings.trace = record::record(&mut run)?;
    let reference = reference::reference(&mut run)?;
    let decided = dir.read_nt_decision()?;
    let nt_at = match (&decided, opts.nt_prefixes) {
        (_, NtPrefixes::All) => NtPrefixesAt::Everywhere,
        (Some(decided), _) => NtPrefixesAt::Points(Arc::new(decided.points.clone())),
        (None, _) => NtPrefixesAt::Nowhere,
    };
    images::images(&mut run, &nt_at)?;
    let states_started = Instant::now();
    let (mut store, mut states) = states::states(&mut run, &nt_at)?;
    let mut nt_summary = None;
    if opts.strategy == Strategy::Reads && opts.nt_prefixes == NtPrefixes::Auto {
        nt_summary = Some(nt::nt_prefixes(&mut run, decided, &mut store, &mut states)?);
    }
    let took = states_started.elapsed();
    run.observer.event(&Event::Finished(Stage::States, took));
    run.timings.states = Some(took.as_secs_f64());
    let judged = verdicts::Judged {
        store: &store,
        states: &states,
        reference: reference.as_ref(),
        nt_prefixes: nt_summary,
    };
    verdicts::verdicts(&mut run, name, judged, started)
}

/// Makes the directory's outputs those of `inputs`: refuses a directory of another test or
/// machine (unless `force`, which starts over), redoes the stages whose inputs changed,
/// and records the inputs and the test. A trace adopted from another run directory is
/// judged again when only Persim's build or the machine's details changed since it was
/// recorded (its images and states are then made again); a trace in place is not, so
/// that a directory never mixes the results of two builds.
fn reconcile(dir: &RunDir, inputs: &Inputs, force: bool) -> Result<()> {
    let recorded = dir.read_inputs()?;
    let root = dir.root().display();
    if force {
        dir.remove_all()?;
    } else if let Some(recorded) = &recorded {
        if recorded.trace_key != inputs.trace_key && dir.has_results() {
            let change = recorded.trace_change(inputs);
            let differs = change.parts.join("; ");
            let holds = recorded.describe_trace();
            match (&recorded.adopted_from, change.same_execution) {
                (Some(_), Some(true)) => {}
                (Some(source), _) => bail!(
                    "{} holds a trace of {holds}; what differs now: {differs}. The trace is of \
                     another test or machine: judge it with the --fs/--vm it was recorded \
                     with, or run the test with --test",
                    source.display()
                ),
                (None, Some(true)) => bail!(
                    "{root} holds a run of {holds}; what differs now: {differs}. The trace is \
                     still of this test on this machine: `persim run --trace-from {root} --out \
                     NEW` judges it again with this Persim; or pass --force to start over here"
                ),
                (None, Some(false)) => bail!(
                    "{root} holds a run of {holds}; what differs now: {differs}. The trace is of \
                     another test or machine: pass --force to start over there, or give \
                     another --out"
                ),
                (None, None) => bail!(
                    "{root} holds a run of {holds}; what differs now: {differs}. If only Persim \
                     was rebuilt, `persim run --trace-from {root} --out NEW` judges the trace \
                     again; otherwise pass --force to start over there, or give another --out"
                ),
            }
        }
        if recorded.images_key != inputs.images_key {
            dir.remove_images()?;
        }
        if recorded.states_key != inputs.states_key {
            dir.remove_states()?;
        }
        if recorded.reference_key != inputs.reference_key {
            dir.remove_reference()?;
        }
    } else if dir.has_results() {
        bail!(
            "{root} holds results that say nothing of what made them (no inputs.json): pass \
             --force to start over there, or give another --out"
        );
    }
    let json = serde_json::to_vec_pretty(inputs)?;
    write_atomically(&dir.inputs(), &json)?;
    Ok(())
}
