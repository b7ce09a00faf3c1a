//! `persim faults`: media faults and scribbles in a finished run's PM images, each
//! corrupted image recovered in the guest as a crash image is, and judged against the
//! uncorrupted image's state (docs/guides/faults.md). The run directory is only read; results go
//! to their own directory, each state saved as soon as it is known, so a campaign resumes:
//!
//! ```text
//! OUT/base/<hash>.img      the uncorrupted images (fully persisted, or the run's crash
//!                          images), removed at the end
//! OUT/images/<hash>.img    corrupted images waiting for recovery (removed once recovered)
//! OUT/states/<hash>.json   what recovering each image gave (corrupted and uncorrupted)
//! OUT/kernel-log/<hash>.txt what the kernel logged meanwhile, if anything (written before
//!                          the state, so a saved state's log is complete)
//! OUT/faults.json          every fault and its outcome, and the summary
//! OUT/summary.txt, summary.svg
//! ```

use crate::cases::TestCase;
use crate::guest::Guest;
use crate::progress::{Event, Observer, Pass, Stage};
use crate::rundir::RunDir;
use crate::stages::{generate_options, materialise_images, read_state};
use crate::PipelineOptions;
use anyhow::{bail, Context, Result};
use persim_analyze::{
    classify_fault, detection_messages, fault_summary_svg, line_diff, state_bytes_lost,
    FaultOutcome, FaultSummary, FaultTally,
};
use persim_image::{
    fully_persisted_images, plan_faults, Fault, FaultKind, GenerateOptions, Image, ImageStore,
    ImagesIndex, Progress,
};
use persim_inspect::{Written, WrittenClass};
use persim_model::{unknown_name, FailureKind, Named, UnknownName};
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use persim_trace::{Reader, Symbols};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use strum::{Display, EnumString, IntoStaticStr, VariantNames};

/// Corrupted images on disk at once, waiting for recovery.
const WINDOW: usize = 32;
/// Lines of a state diff kept per finding.
const DIFF_LINES: usize = 12;

/// Which bytes faults are drawn from.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum FaultPlace {
    /// The bytes the test wrote (from the trace).
    Written,
    /// Of those, the ones whose last store is not a data store.
    Metadata,
    /// Of those, the ones whose last store is a data store (`fault_data_writers`).
    Data,
    /// Anywhere in PM.
    Any,
}

impl Named for FaultPlace {
    const WHAT: &'static str = "fault place";
}

/// Which uncorrupted images faults go into.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum FaultsAt {
    /// The image the whole trace leaves, every store persisted.
    Final,
    /// The fully persisted image at each checkpoint, and the final one.
    EachCheckpoint,
    /// The run's crash images (a torn state and a fault at once).
    FailurePoints,
}

impl Named for FaultsAt {
    const WHAT: &'static str = "fault images";
}

/// What a fault campaign injects.
#[derive(Clone, Debug)]
pub struct FaultOptions {
    pub kinds: Vec<FaultKind>,
    pub places: Vec<FaultPlace>,
    /// Faults per kind, place and uncorrupted image.
    pub count: usize,
    pub seed: u64,
    pub at: FaultsAt,
    /// Only PM bytes in this range (`--range`): of the place's bytes, those in it.
    pub range: Option<Range<u64>>,
    /// The function-name prefixes of data stores (the VM configuration's
    /// `fault_data_writers`, or the default rule).
    pub data_writers: Vec<String>,
}

/// One fault and what recovering its image gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultResult {
    /// The uncorrupted image: `final`, `checkpoint N`, or a crash image's hash.
    pub image: String,
    pub place: FaultPlace,
    pub fault: Fault,
    /// The corrupted image's hash.
    pub faulted: String,
    pub outcome: FaultOutcome,
    /// The code that last wrote the first written byte the fault hit, if it hit one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
    pub bytes_lost: u64,
    /// Findings: the state diff (silent) or the start of the guest's output (crash);
    /// detected: the kernel's checksum or corruption messages, or how recovery failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A campaign's results (`OUT/faults.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultsReport {
    pub run: PathBuf,
    pub seed: u64,
    pub faults: Vec<FaultResult>,
    pub summary: FaultSummary,
}

impl FaultsReport {
    /// Reads a fault campaign's `faults.json` from its directory; None when it has none.
    pub fn load(dir: &Path) -> Result<Option<FaultsReport>> {
        let path = FaultsDir(dir.to_path_buf()).report();
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let report = serde_json::from_slice(&text)
            .with_context(|| format!("{} is malformed", path.display()))?;
        Ok(Some(report))
    }

    pub fn findings(&self) -> impl Iterator<Item = &FaultResult> {
        self.faults.iter().filter(|f| f.outcome.is_finding())
    }

    /// The findings and the summary, for people.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for f in self.findings() {
            let range = f.fault.range(u64::MAX);
            out.push_str(&format!(
                "{} in {} ({}): {} at PM {:#x}..{:#x}\n  last written by: {}\n",
                f.outcome,
                f.image,
                f.place,
                f.fault.kind,
                range.start,
                range.end,
                f.writer.as_deref().unwrap_or("(no store of the test)"),
            ));
            for line in f.detail.lines() {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out.push_str(&self.summary.to_text());
        out
    }
}

/// The paths of a campaign's output directory.
struct FaultsDir(PathBuf);

impl FaultsDir {
    fn base(&self) -> PathBuf {
        self.0.join("base")
    }
    fn images(&self) -> PathBuf {
        self.0.join("images")
    }
    fn state(&self, hash: &str) -> PathBuf {
        self.0.join("states").join(format!("{hash}.json"))
    }
    fn kernel_log(&self, hash: &str) -> PathBuf {
        self.0.join("kernel-log").join(format!("{hash}.txt"))
    }
    /// The kernel log of an image's recovery: empty when it logged nothing or is not known.
    fn read_kernel_log(&self, hash: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.kernel_log(hash)).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    }
    fn report(&self) -> PathBuf {
        self.0.join("faults.json")
    }
    fn summary_text(&self) -> PathBuf {
        self.0.join("summary.txt")
    }
    fn summary_svg(&self) -> PathBuf {
        self.0.join("summary.svg")
    }
}

/// An uncorrupted image faults go into.
struct Base {
    label: String,
    hash: String,
}

/// Runs the campaign of `opts` on the run in `run` (only read), with `out` (locked by its
/// caller) for its results; `guest` recovers the images as `test` says.
pub fn run_faults(
    run: &RunDir,
    test: &TestCase,
    guest: &dyn Guest,
    opts: &FaultOptions,
    out: &Path,
    observer: &mut dyn Observer,
) -> Result<FaultsReport> {
    let recording = run.recording();
    if !recording.is_complete() {
        bail!(
            "{} holds no recorded trace (trace.ptrace and the files beside it): give the \
             directory of a finished `persim run`",
            run.root().display()
        );
    }
    let inputs = run
        .read_inputs()?
        .with_context(|| format!("{} has no inputs.json", run.root().display()))?;
    inputs.check_recovery_on(guest, run.root())?;
    let dir = FaultsDir(out.to_path_buf());
    let header = Reader::open(run.trace().as_path())?.header();
    let (pm_len, image_len) = (header.pm_size, header.pm_size + header.blk_size);
    if let Some(range) = opts.range.as_ref().filter(|r| r.end > pm_len) {
        bail!(
            "--range {:#x}:{:#x} ends beyond the run's PM of {pm_len:#x} bytes: give a range \
             inside it",
            range.start,
            range.end - range.start
        );
    }
    let symbols = Symbols::of_trace(&run.trace());
    let written = Written::of_trace(
        Reader::open(run.trace().as_path())?,
        symbols.as_ref(),
        &opts.data_writers,
    )?;
    let pipeline = PipelineOptions {
        cache: inputs.cache,
        strategy: inputs.strategy,
        max_images: inputs.max_images,
        ..PipelineOptions::default()
    };
    observer.event(&Event::Replaying(Pass::Faults));
    let bases = base_images(run, &pipeline, opts.at, &dir.base(), observer)?;
    // The uncorrupted states, recovered here even where the run saved them: a fault's
    // verdict compares its recovery's kernel log with the uncorrupted image's, which the
    // run directory does not keep (a mount banner is no detection).
    let uncorrupted: Vec<(String, PathBuf)> = (bases.iter())
        .map(|b| (b.hash.clone(), ImageStore::image_file(&dir.base(), &b.hash)))
        .collect();
    recover(guest, test, &dir, &uncorrupted, false, observer)?;
    let mut baselines = BTreeMap::new();
    for base in &bases {
        let state = read_state(&dir.state(&base.hash)).context("a baseline state is missing")?;
        if state.is_error() {
            let first = state.text().lines().next().unwrap_or("");
            bail!(
                "the uncorrupted image of {} does not recover ({}: {first}): faults need a \
                 state to compare with; choose other images with --at",
                base.label,
                state.outcome()
            );
        }
        baselines.insert(base.hash.clone(), state);
    }
    // Every fault's image, written as it is planned and recovered a window at a time.
    let mut planned = Vec::new();
    let mut pending: Vec<(String, PathBuf)> = Vec::new();
    let mut queued = BTreeSet::new();
    std::fs::create_dir_all(dir.images())
        .with_context(|| format!("cannot create {}", dir.images().display()))?;
    for (i, base) in bases.iter().enumerate() {
        let file = ImageStore::image_file(&dir.base(), &base.hash);
        let image = match file.is_file() {
            true => Some(Image::from_file(&file, image_len)?),
            false => None,
        };
        for &place in &opts.places {
            let targets = match place {
                FaultPlace::Written => written.ranges(WrittenClass::All),
                FaultPlace::Metadata => written.ranges(WrittenClass::Metadata),
                FaultPlace::Data => written.ranges(WrittenClass::Data),
                FaultPlace::Any => std::iter::once(0..pm_len).collect(),
            };
            let targets = match &opts.range {
                Some(range) => within(&targets, range),
                None => targets,
            };
            for &kind in &opts.kinds {
                let seed = opts.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for fault in plan_faults(kind, &targets, pm_len, opts.count, seed) {
                    let hash = match &image {
                        Some(image) => {
                            let faulted = fault.apply(image);
                            let hash = faulted.hash().to_hex().to_string();
                            let known = hash == base.hash || dir.state(&hash).is_file();
                            if !known && queued.insert(hash.clone()) {
                                let path = ImageStore::image_file(&dir.images(), &hash);
                                faulted.write_to(&path)?;
                                pending.push((hash.clone(), path));
                            }
                            hash
                        }
                        None => String::new(),
                    };
                    planned.push((base, place, fault, hash));
                    if pending.len() >= WINDOW {
                        recover(
                            guest,
                            test,
                            &dir,
                            &std::mem::take(&mut pending),
                            true,
                            observer,
                        )?;
                    }
                }
            }
        }
    }
    recover(guest, test, &dir, &pending, true, observer)?;
    let faults = planned
        .into_iter()
        .map(|(base, place, fault, hash)| {
            let baseline = &baselines[&base.hash];
            let (state, log) = match hash == base.hash {
                true => (baseline.clone(), Vec::new()),
                false => (
                    read_state(&dir.state(&hash))
                        .with_context(|| format!("the state of faulted image {hash} is missing"))?,
                    dir.read_kernel_log(&hash),
                ),
            };
            let detections = detection_messages(&log, &dir.read_kernel_log(&base.hash));
            let judged = Judged {
                baseline,
                state: &state,
                detections: &detections,
            };
            Ok(judge(
                base, place, fault, hash, &judged, &written, image_len,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let tallies: Vec<FaultTally> = faults
        .iter()
        .map(|f| FaultTally {
            kind: f.fault.kind.to_string(),
            place: f.place.to_string(),
            outcome: f.outcome,
            bytes_lost: f.bytes_lost,
        })
        .collect();
    let report = FaultsReport {
        run: run.root().to_path_buf(),
        seed: opts.seed,
        faults,
        summary: FaultSummary::of(&tallies),
    };
    write_atomically(&dir.report(), &serde_json::to_vec_pretty(&report)?)?;
    write_atomically(&dir.summary_text(), report.summary.to_text().as_bytes())?;
    let svg = fault_summary_svg(&report.summary).map_err(anyhow::Error::msg)?;
    write_atomically(&dir.summary_svg(), svg.as_bytes())?;
    remove_dir(&dir.base())?;
    remove_dir(&dir.images())?;
    Ok(report)
}

/// A corrupted image's recovery beside the uncorrupted one's.
struct Judged<'a> {
    baseline: &'a Recovered,
    state: &'a Recovered,
    /// Its kernel log's checksum and corruption messages (`detection_messages`).
    detections: &'a [String],
}

/// One fault's result.
fn judge(
    base: &Base,
    place: FaultPlace,
    fault: Fault,
    faulted: String,
    judged: &Judged,
    written: &Written,
    image_len: u64,
) -> FaultResult {
    let Judged {
        baseline,
        state,
        detections,
    } = *judged;
    let outcome = classify_fault(baseline, state, detections);
    let detail = match outcome {
        FaultOutcome::Silent => first_lines(&line_diff(baseline.text(), state.text(), 1)),
        FaultOutcome::Crash => first_lines(state.text()),
        FaultOutcome::Detected | FaultOutcome::Corrected if !detections.is_empty() => {
            first_lines(&detections.join("\n"))
        }
        FaultOutcome::Detected => first_lines(state.text()),
        FaultOutcome::Masked | FaultOutcome::Corrected => String::new(),
    };
    let bytes_lost = match outcome {
        FaultOutcome::Silent => state_bytes_lost(baseline, state),
        _ => 0,
    };
    let writer = written.line_in(fault.range(image_len)).map(|line| {
        let class = if line.data { "data" } else { "metadata" };
        let code = line.writer.as_deref().unwrap_or("unknown code");
        format!("{code} ({class})")
    });
    FaultResult {
        image: base.label.clone(),
        place,
        fault,
        faulted,
        outcome,
        writer,
        bytes_lost,
        detail,
    }
}

/// The parts of `ranges` inside `limit`.
fn within(ranges: &[Range<u64>], limit: &Range<u64>) -> Vec<Range<u64>> {
    (ranges.iter())
        .map(|r| r.start.max(limit.start)..r.end.min(limit.end))
        .filter(|r| r.start < r.end)
        .collect()
}

fn first_lines(text: &str) -> String {
    let mut kept: Vec<&str> = text.lines().take(DIFF_LINES).collect();
    if text.lines().nth(DIFF_LINES).is_some() {
        kept.push("…");
    }
    kept.join("\n")
}

/// Recovers `images` (hash, file) whose state is not saved yet, saving each state as soon
/// as it is known and, when `remove`, deleting its file.
fn recover(
    guest: &dyn Guest,
    test: &TestCase,
    dir: &FaultsDir,
    images: &[(String, PathBuf)],
    remove: bool,
    observer: &mut dyn Observer,
) -> Result<()> {
    let images: Vec<&(String, PathBuf)> = images
        .iter()
        .filter(|(hash, _)| read_state(&dir.state(hash)).is_none())
        .collect();
    if images.is_empty() {
        return Ok(());
    }
    for sub in ["states", "kernel-log"] {
        let sub = dir.0.join(sub);
        std::fs::create_dir_all(&sub)
            .with_context(|| format!("cannot create {}", sub.display()))?;
    }
    let paths: Vec<PathBuf> = images.iter().map(|(_, path)| path.clone()).collect();
    let (total, mut done) = (paths.len(), 0);
    let mut failure = None;
    guest.extract(test, &paths, false, &mut |i, extracted| {
        let (hash, path) = images[i];
        let log = extracted.kernel_log.join("\n");
        let saved = match log.is_empty() {
            true => Ok(()),
            false => write_atomically(&dir.kernel_log(hash), log.as_bytes()),
        }
        .map_err(anyhow::Error::from)
        .and_then(|()| Ok(serde_json::to_vec(&extracted.state)?))
        .and_then(|json| Ok(write_atomically(&dir.state(hash), &json)?));
        match saved {
            Ok(()) if remove => drop(std::fs::remove_file(path)),
            Ok(()) => {}
            Err(e) => drop(failure.get_or_insert(e)),
        }
        done += 1;
        observer.event(&Event::Recovered {
            stage: Stage::Faults,
            done,
            total,
        });
    })?;
    failure.map_or(Ok(()), Err)
}

/// The uncorrupted images of `at`, materialised in `out`.
fn base_images(
    run: &RunDir,
    pipeline: &PipelineOptions,
    at: FaultsAt,
    out: &Path,
    observer: &mut dyn Observer,
) -> Result<Vec<Base>> {
    let kinds: &[FailureKind] = match at {
        FaultsAt::FailurePoints => return crash_images(run, out),
        FaultsAt::Final => &[FailureKind::End],
        FaultsAt::EachCheckpoint => &[FailureKind::Checkpoint, FailureKind::End],
    };
    // Only these points' fully persisted images: one replay, not an image at every point.
    let options = GenerateOptions {
        from_checkpoint: None,
        ..generate_options(pipeline, PathBuf::new())
    };
    let made = fully_persisted_images(&options, &run.trace(), kinds, out, &mut |p| {
        observer.event(&Event::replayed(p))
    })?;
    observer.event(&Event::replayed(Progress {
        entries: made.generated.entries,
        failure_points: made.generated.failure_points,
        images: made.generated.images.len(),
    }));
    let end = made.end.context("the trace has no end")?;
    let mut chosen: Vec<(String, String)> = (made.checkpoints.into_iter())
        .map(|(checkpoint, hash)| (format!("checkpoint {checkpoint}"), hash))
        .collect();
    chosen.push(("final".to_owned(), end));
    Ok(bases(chosen))
}

/// The run's crash images, those not in `out` yet materialised there.
fn crash_images(run: &RunDir, out: &Path) -> Result<Vec<Base>> {
    let index = ImagesIndex::read(&run.images_index()).with_context(|| {
        format!(
            "--at failure-points needs the run's crash images (images.json): finish \
             `persim run --out {}` first",
            run.root().display()
        )
    })?;
    let missing: Vec<String> = (index.images.keys())
        .filter(|h| !ImageStore::image_file(out, h).is_file())
        .cloned()
        .collect();
    if !missing.is_empty() {
        materialise_images(run, &missing, out)?;
    }
    let chosen = index.images.into_keys().map(|h| (h.clone(), h)).collect();
    Ok(bases(chosen))
}

fn bases(chosen: Vec<(String, String)>) -> Vec<Base> {
    (chosen.into_iter())
        .map(|(label, hash)| Base { label, hash })
        .collect()
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", dir.display()))
        }
        _ => Ok(()),
    }
}
