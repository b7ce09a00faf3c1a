//! One test through every stage — record, images, states, verdicts — into a run
//! directory. A stage whose output exists is not run again, so an interrupted run resumes.

use crate::guest::Guest;
use crate::images::generate_images;
use crate::images_index::{ImagesIndex, ImagesJsonWriter, PointReads};
use crate::inputs::Inputs;
use crate::options::{Guidance, ImagesOptions, NtPrefixes, NtPrefixesAt, PipelineOptions};
use crate::progress::{Event, Observer, Stage};
use crate::reads::{nt_dependent, read_sets, saved_read_sets};
use crate::rundir::RunDir;
use crate::states::{extract_missing, saved_states};
use crate::testcase::TestCase;
use anyhow::{bail, Context, Result};
use persim_analyze::{
    find_culprits, verdicts, CheckpointVerdict, ImageOrigins, NtSummary, Report, RuntimeSummary,
    StateLines, Timings,
};
use persim_image::ImageStore;
use persim_model::{Config, Strategy};
use persim_state::Recovered;
use persim_trace::atomic_file::{create_atomically, write_atomically};
use persim_trace::{Reader, Symbols};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Runs `test` through every stage into `dir` and writes the report there.
pub fn run_test(
    opts: &PipelineOptions,
    guest: &dyn Guest,
    name: &str,
    test: &TestCase,
    dir: &RunDir,
    observer: &mut dyn Observer,
) -> Result<Report> {
    let started = Instant::now();
    reconcile(
        dir,
        &Inputs::of(opts, name, test, &guest.identity()),
        opts.force,
    )?;
    let mut timings = Timings {
        trace: record_stage(guest, test, dir, observer)?,
        ..Timings::default()
    };
    let decided = dir.read_nt_decision()?;
    let guidance = |nt_at: NtPrefixesAt, observer: &mut dyn Observer| -> Result<Guidance> {
        if opts.strategy != Strategy::Reads {
            return Ok(Guidance::Unguided);
        }
        let sets = read_sets(opts, guest, test, dir, observer)?;
        Ok(Guidance::ReadSets(Arc::new(sets), nt_at))
    };
    let nt_at = match (&decided, opts.nt_prefixes) {
        (_, NtPrefixes::All) => NtPrefixesAt::Everywhere,
        (Some(decided), _) => NtPrefixesAt::Points(Arc::new(decided.points.clone())),
        (None, _) => NtPrefixesAt::Nowhere,
    };
    if dir.images_index().is_file() {
        observer.event(&Event::Reused(Stage::Images));
    } else {
        let started = Instant::now();
        let guidance = guidance(nt_at.clone(), observer)?;
        if opts.strategy == Strategy::Reads {
            timings.reads = Some(started.elapsed().as_secs_f64());
        }
        let started = Instant::now();
        images_stage(opts, guidance, dir, observer)?;
        timings.images = Some(started.elapsed().as_secs_f64());
    }

    let stage = Instant::now();
    let states_of = |nt_at: NtPrefixesAt, observer: &mut dyn Observer| {
        let mut store = ImageStore::open(dir.image_store())?;
        let mut saved = saved_states(dir, &store);
        if saved.lost_images() {
            // Images without a state whose files are gone: a replay writes them again.
            images_stage(opts, guidance(nt_at, observer)?, dir, observer)?;
            store = ImageStore::open(dir.image_store())?;
            saved = saved_states(dir, &store);
        }
        let states = extract_missing(dir, saved, guest, test, opts.keep_images, observer)?;
        anyhow::Ok((store, states))
    };
    let (mut store, mut states) = states_of(nt_at, observer)?;
    let mut nt_summary = None;
    if opts.strategy == Strategy::Reads && opts.nt_prefixes == NtPrefixes::Auto {
        // Suvi-NT: NT prefixes where some state hinges on NT stores, then judge again.
        let index = ImagesIndex::read(&dir.images_index())?;
        let decision = match decided {
            Some(decision) => decision,
            None => {
                let decision = nt_dependent(&index, &states);
                write_atomically(&dir.nt_decision(), &serde_json::to_vec_pretty(&decision)?)?;
                decision
            }
        };
        let generated = index
            .failure_points
            .iter()
            .any(|p| p.reads.as_ref().is_some_and(|r| r.nt_prefixes));
        if !decision.points.is_empty() && !generated {
            let nt_at = NtPrefixesAt::Points(Arc::new(decision.points.clone()));
            images_stage(opts, guidance(nt_at.clone(), observer)?, dir, observer)?;
            (store, states) = states_of(nt_at, observer)?;
        }
        let distinct: BTreeSet<&Recovered> = states.values().collect();
        nt_summary = Some(NtSummary {
            dependent_states: decision.dependent_states,
            failure_points: decision.points.len(),
            new_states: distinct.len().saturating_sub(decision.states_before),
        });
    }
    let took = stage.elapsed();
    observer.event(&Event::Finished(Stage::States, took));
    timings.states = Some(took.as_secs_f64());

    let mut checkpoints = judge(&store, &states);
    explain(dir, opts, &mut checkpoints)?;
    timings.total = Some(started.elapsed().as_secs_f64());
    let report = Report {
        test: name.to_string(),
        fs: guest.name().to_string(),
        cache: opts.cache,
        strategy: opts.strategy,
        checkpoints,
        nt_prefixes: nt_summary,
        runtime_data: runtime_summary(&ImagesIndex::read(&dir.images_index())?),
        timings,
    };
    write_atomically(
        &dir.report_json(),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    write_atomically(&dir.report_text(), report.to_text().as_bytes())?;
    Ok(report)
}

/// Makes the directory's outputs those of `inputs`: refuses a directory of another test or
/// machine (unless `force`, which starts over), redoes the stages whose inputs changed,
/// and records the inputs and the test.
fn reconcile(dir: &RunDir, inputs: &Inputs, force: bool) -> Result<()> {
    let recorded = dir.read_inputs()?;
    let root = dir.root().display();
    if force {
        dir.remove_all()?;
    } else if let Some(recorded) = &recorded {
        if recorded.trace_key != inputs.trace_key && dir.has_results() {
            bail!(
                "{root} holds a run of {}, not of {}: pass --force to start over there, or \
                 give another --out",
                recorded.describe(),
                inputs.describe()
            );
        }
        if recorded.images_key != inputs.images_key {
            dir.remove_images()?;
        }
        if recorded.states_key != inputs.states_key {
            dir.remove_states()?;
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

/// Records the trace unless the directory has it; returns the seconds it took.
fn record_stage(
    guest: &dyn Guest,
    test: &TestCase,
    dir: &RunDir,
    observer: &mut dyn Observer,
) -> Result<Option<f64>> {
    if dir.trace().is_file() && dir.initial_image().is_file() {
        observer.event(&Event::Reused(Stage::Trace));
        return Ok(None);
    }
    let stage = Instant::now();
    write_atomically(&dir.test(), toml::to_string(test)?.as_bytes())?;
    let recording = guest
        .record(&test.setup, &test.command(), &dir.trace())
        .map_err(|e| {
            // A hang or a crash ends the guest's output inside the operation to blame.
            match test.operation_at_end(&format!("{e:#}")) {
                Some(op) => e.context(format!("the traced run stopped in {op}")),
                None => e,
            }
        })?;
    let output = test.output_by_operation(&recording.output);
    write_atomically(&dir.output(), output.as_bytes())?;
    if recording.exit_code != 0 {
        // The workload did not run as written: nothing of it is a result.
        let _ = std::fs::remove_file(dir.trace());
        let _ = std::fs::remove_file(dir.initial_image());
        let _ = std::fs::remove_file(dir.initial_block_image());
        bail!("{}", test.failure(recording.exit_code, &recording.output));
    }
    let took = stage.elapsed();
    observer.event(&Event::Finished(Stage::Trace, took));
    Ok(Some(took.as_secs_f64()))
}

/// Generates the run's images into its store and writes the images index. The index
/// appears only when the generation is complete.
fn images_stage(
    opts: &PipelineOptions,
    guidance: Guidance,
    dir: &RunDir,
    observer: &mut dyn Observer,
) -> Result<()> {
    let stage = Instant::now();
    let options = ImagesOptions {
        guidance,
        ..ImagesOptions::for_run(opts, dir.image_store())
    };
    let mut failure = None;
    let written = create_atomically(&dir.images_index(), |file| {
        let mut writer = ImagesJsonWriter::new(BufWriter::new(file));
        let generated = generate_images(&options, &dir.trace(), |_| Ok(()), &mut writer, observer);
        match generated {
            Ok(summary) => writer.finish(&summary.images)?.flush(),
            Err(e) => {
                failure = Some(e);
                Err(io::Error::other("image generation failed"))
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    written?;
    observer.event(&Event::Finished(Stage::Images, stage.elapsed()));
    Ok(())
}

/// The verdicts of every checkpoint interval, from the store's origins and the states.
pub fn judge(store: &ImageStore, states: &BTreeMap<String, Recovered>) -> Vec<CheckpointVerdict> {
    let hashes: Vec<String> = store
        .records()
        .map(|(h, _)| h.to_hex().to_string())
        .collect();
    verdicts(
        store
            .records()
            .zip(&hashes)
            .map(|((_, record), hash)| ImageOrigins {
                hash,
                origins: &record.origins,
            }),
        |h| states.get(h),
    )
}

/// Names the code behind each violation (`persim_analyze::find_culprits`), through the
/// symbols recorded beside the trace when there are any; with `reads`, only stores to
/// lines recovery reads are named (the others cannot change a state), and each state
/// says which lines were explored and skipped at its first failure point.
fn explain(
    dir: &RunDir,
    opts: &PipelineOptions,
    checkpoints: &mut [CheckpointVerdict],
) -> Result<()> {
    let trace = dir.trace();
    let mut config = Config::of_header(&Reader::open(&trace)?.header());
    config.cache = opts.cache;
    let symbols = Symbols::of_trace(&trace);
    let reads: BTreeMap<u64, PointReads> = ImagesIndex::read(&dir.images_index())
        .map(|index| index.failure_points)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| Some((p.index, p.reads.filter(|r| r.known)?)))
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
        .map(|(point, r)| (point, r.lines.explored.into_iter().collect()))
        .collect();
    find_culprits(
        || Reader::open(&trace),
        config,
        checkpoints,
        symbols.as_ref(),
        &focus,
    )
    .with_context(|| format!("cannot replay {} to find the code behind", trace.display()))
}

/// Makes the crash images with these hashes (hex) of a run again, from its trace and the
/// options it ran with, as `<hash>.img` in `out`; returns their paths. An image the run's
/// options do not produce is an error.
pub fn materialise_images(dir: &RunDir, hashes: &[String], out: &Path) -> Result<Vec<PathBuf>> {
    let inputs = dir
        .read_inputs()?
        .with_context(|| format!("{} has no inputs.json", dir.root().display()))?;
    let opts = PipelineOptions {
        cache: inputs.cache,
        strategy: inputs.strategy,
        max_images: inputs.max_images,
        ..PipelineOptions::default()
    };
    let guidance = recorded_guidance(dir)?;
    let options = ImagesOptions {
        store: None,
        materialise: Some((hashes.iter().cloned().collect(), out.to_path_buf())),
        guidance,
        ..ImagesOptions::for_run(&opts, PathBuf::new())
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    generate_images(&options, &dir.trace(), |_| Ok(()), &mut (), &mut ())?;
    let paths: Vec<PathBuf> = hashes
        .iter()
        .map(|h| out.join(format!("{h}.img")))
        .collect();
    if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
        bail!(
            "no crash image of {} has the hash of {}",
            dir.root().display(),
            missing.display()
        );
    }
    Ok(paths)
}

/// How the run in `dir` guided `reads` (its read sets and where it explored NT prefixes),
/// to make its images again; `Unguided` for the other strategies.
pub fn recorded_guidance(dir: &RunDir) -> Result<Guidance> {
    let inputs = dir
        .read_inputs()?
        .with_context(|| format!("{} has no inputs.json", dir.root().display()))?;
    if inputs.strategy != Strategy::Reads {
        return Ok(Guidance::Unguided);
    }
    let nt_at = match (inputs.nt_prefixes, dir.read_nt_decision()?) {
        (NtPrefixes::All, _) => NtPrefixesAt::Everywhere,
        (_, Some(decided)) => NtPrefixesAt::Points(Arc::new(decided.points)),
        (_, None) => NtPrefixesAt::Nowhere,
    };
    Ok(Guidance::ReadSets(Arc::new(saved_read_sets(dir)), nt_at))
}

/// The dirty lines of declared run-time data the images index records, if any.
fn runtime_summary(index: &ImagesIndex) -> Option<RuntimeSummary> {
    let points = index
        .failure_points
        .iter()
        .filter(|p| !p.runtime_lines.is_empty());
    let lines: BTreeSet<u64> = points
        .clone()
        .flat_map(|p| p.runtime_lines.clone())
        .collect();
    (!lines.is_empty()).then(|| RuntimeSummary {
        lines: lines.len(),
        failure_points: points.count(),
    })
}
