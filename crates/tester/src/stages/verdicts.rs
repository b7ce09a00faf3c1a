//! The verdicts stage: every checkpoint interval judged from the store's origins and the
//! states, the code behind each violation named, and the report written.

use super::{images, Run};
use crate::progress::Pass;
use anyhow::{bail, Context, Result};
use persim_analyze::{
    check_final_states, find_culprits, verdicts as judge_intervals, CheckpointVerdict,
    ImageOrigins, Invariant, NtSummary, ReferenceStates, Report, RuntimeSummary, StateLines,
};
use persim_image::{ImageStore, ImagesIndex, PointReads, PointRecord};
use persim_model::Config;
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use persim_trace::{Op, Reader, Recording, Symbols};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// What the verdicts are made of.
pub(super) struct Judged<'a> {
    pub store: &'a ImageStore,
    pub states: &'a BTreeMap<String, Recovered>,
    /// `--reference`: its state at each checkpoint.
    pub reference: Option<&'a ReferenceStates>,
    pub nt_prefixes: Option<NtSummary>,
}

/// Judges the run, names the code behind each violation, and writes the report.
pub(super) fn verdicts(
    run: &mut Run,
    name: &str,
    judged: Judged,
    started: Instant,
) -> Result<Report> {
    let Judged {
        store,
        states,
        reference,
        nt_prefixes,
    } = judged;
    let test = run.test;
    let mut checkpoints = judge(store, states, &test.invariant);
    if let Some(n) = (test.expect.0.keys()).find(|&&n| !checkpoints.iter().any(|c| c.from == n)) {
        bail!(
            "`expect.{n}` names operation {n}, but the trace has no interval {n} -> {}: the \
             program marked fewer checkpoints",
            n + 1
        );
    }
    let fs_dump = test.state.is_none();
    check_final_states(
        &mut checkpoints,
        |h| states.get(h),
        reference,
        &test.expect,
        fs_dump,
    );
    explain(run, &mut checkpoints)?;
    let index = images::index(run)?;
    let runtime_data = followed_summary(index, |p| &p.runtime_lines);
    let outside_program = followed_summary(index, |p| &p.outside_program_lines);
    let journal_protected = followed_summary(index, |p| &p.protected_lines);
    let journal_violations = index
        .failure_points
        .iter()
        .flat_map(|p| &p.journal_violations)
        .map(|v| v.describe())
        .collect();
    let mut timings = run.timings.clone();
    timings.total = Some(started.elapsed().as_secs_f64());
    let report = Report {
        test: name.to_string(),
        fs: run.guest.name().to_string(),
        cache: run.opts.cache,
        strategy: run.opts.strategy,
        checkpoints,
        nt_prefixes,
        runtime_data,
        outside_program,
        journal_protected,
        journal_violations,
        traced_nothing: !writes_media(&run.dir.trace())?,
        timings,
    };
    let dir = run.dir;
    write_atomically(
        &dir.report_json(),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    write_atomically(&dir.report_text(), report.to_text().as_bytes())?;
    Ok(report)
}

/// The verdicts of every checkpoint interval, from the store's origins, the states and the
/// test's invariants.
pub fn judge(
    store: &ImageStore,
    states: &BTreeMap<String, Recovered>,
    invariants: &[Invariant],
) -> Vec<CheckpointVerdict> {
    let hashes: Vec<String> = store
        .records()
        .map(|(h, _)| h.to_hex().to_string())
        .collect();
    judge_intervals(
        store
            .records()
            .zip(&hashes)
            .map(|((_, record), hash)| ImageOrigins {
                hash,
                origins: &record.origins,
            }),
        |h| states.get(h),
        invariants,
    )
}

/// Whether the trace holds a store to PM or a write to the disk (it stops at the first).
fn writes_media(trace: &std::path::Path) -> Result<bool> {
    for entry in Reader::open(trace)? {
        if matches!(entry?.op, Op::Write { .. } | Op::BlkWrite { .. }) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Names the code behind each violation (`persim_analyze::find_culprits`), through the
/// symbols recorded beside the trace when there are any; with `reads`, only stores to
/// lines recovery reads are named (the others cannot change a state), and each state
/// says which lines were explored and skipped at its first failure point.
fn explain(run: &mut Run, checkpoints: &mut [CheckpointVerdict]) -> Result<()> {
    let trace = run.dir.trace();
    let mut config = Config::of_header(&Reader::open(&trace)?.header());
    config.cache = run.opts.cache;
    config.scope = run.opts.scope;
    let symbols = Symbols::of_trace(&trace);
    let reads: BTreeMap<u64, &PointReads> = images::index(run)?
        .failure_points
        .iter()
        .filter_map(|p| Some((p.index, p.reads.as_ref().filter(|r| r.known)?)))
        .collect();
    for state in checkpoints.iter_mut().flat_map(|c| &mut c.states) {
        let Some((&point, r)) = state
            .failure_points
            .first()
            .and_then(|p| reads.get_key_value(p))
        else {
            continue;
        };
        state.lines = Some(StateLines {
            point,
            explored: r.lines.explored.clone(),
            skipped: r.lines.skipped.clone(),
        });
    }
    let focus: BTreeMap<u64, BTreeSet<u64>> = reads
        .into_iter()
        .map(|(point, r)| (point, r.lines.explored.iter().copied().collect()))
        .collect();
    let initial = Recording::new(&trace).initial_image();
    run.replaying(Pass::Culprits);
    find_culprits(
        || Reader::open(&trace),
        config,
        initial.is_file().then_some(initial.as_path()),
        checkpoints,
        symbols.as_ref(),
        &focus,
    )
    .with_context(|| format!("cannot replay {} to find the code behind", trace.display()))
}

/// The dirty lines that followed the cut (`lines` of each failure point: declared run-time
/// data, or lines outside the program's PM) the images index records, if any.
fn followed_summary(
    index: &ImagesIndex,
    lines: impl Fn(&PointRecord) -> &Vec<u64>,
) -> Option<RuntimeSummary> {
    let points = index.failure_points.iter().filter(|p| !lines(p).is_empty());
    let distinct: BTreeSet<u64> = points.clone().flat_map(|p| lines(p).clone()).collect();
    (!distinct.is_empty()).then(|| RuntimeSummary {
        lines: distinct.len(),
        failure_points: points.count(),
    })
}
