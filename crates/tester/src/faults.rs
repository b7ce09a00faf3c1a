//! `persim faults`: media faults and scribbles in a finished run's PM images, each
//! corrupted image recovered in the guest as a crash image is, and judged against the
//! uncorrupted image's state (docs/faults.md). The run directory is only read; results go
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
    FaultOutcome, FaultSummary, FaultTally, Written, WrittenClass,
};
use persim_image::{
    generate_images, plan_faults, Fault, FaultKind, GenerateOptions, Guidance, Image, ImageStore,
    ImagesIndex, PointRecord, PointSink,
};
use persim_model::{unknown_name, FailureKind, Named, UnknownName};
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use persim_trace::{Reader, Symbols};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
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
    /// Its state in the run directory, if saved there.
    saved: Option<Recovered>,
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
    let dir = FaultsDir(out.to_path_buf());
    let header = Reader::open(run.trace().as_path())?.header();
    let (pm_len, image_len) = (header.pm_size, header.pm_size + header.blk_size);
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
    let bases = base_images(run, &pipeline, opts.at, &dir.base())?;
    // The uncorrupted states: the run's, or recovered here.
    let unknown: Vec<(String, PathBuf)> = bases
        .iter()
        .filter(|b| b.saved.is_none())
        .map(|b| (b.hash.clone(), ImageStore::image_file(&dir.base(), &b.hash)))
        .collect();
    recover(guest, test, &dir, &unknown, false, observer)?;
    let mut baselines = BTreeMap::new();
    for base in &bases {
        let state = match &base.saved {
            Some(state) => state.clone(),
            None => read_state(&dir.state(&base.hash)).context("a baseline state is missing")?,
        };
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
        FaultOutcome::Detected if !detections.is_empty() => first_lines(&detections.join("\n")),
        FaultOutcome::Detected => first_lines(state.text()),
        FaultOutcome::Masked => String::new(),
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

/// The uncorrupted images of `at`, materialised in `out`, with their states if the run
/// saved them.
fn base_images(
    run: &RunDir,
    pipeline: &PipelineOptions,
    at: FaultsAt,
    out: &Path,
) -> Result<Vec<Base>> {
    let chosen: Vec<(String, String)> = match at {
        FaultsAt::FailurePoints => {
            let index = ImagesIndex::read(&run.images_index()).with_context(|| {
                format!(
                    "--at failure-points needs the run's crash images (images.json): finish \
                     `persim run --out {}` first",
                    run.root().display()
                )
            })?;
            index
                .images
                .keys()
                .map(|h| (h.clone(), h.clone()))
                .collect()
        }
        FaultsAt::Final | FaultsAt::EachCheckpoint => {
            let mut points = FullyPersisted::default();
            let options = GenerateOptions {
                guidance: Guidance::FullyPersisted,
                store: None,
                from_checkpoint: None,
                ..generate_options(pipeline, PathBuf::new())
            };
            generate_images(&options, &run.trace(), |_| Ok(()), &mut points, &mut |_| {})?;
            let last = points.last.context("the trace has no failure point")?;
            let mut chosen = Vec::new();
            if at == FaultsAt::EachCheckpoint {
                for (checkpoint, hash) in points.checkpoints {
                    chosen.push((format!("checkpoint {checkpoint}"), hash));
                }
            }
            chosen.push(("final".to_owned(), last));
            chosen
        }
    };
    let hashes: Vec<String> = chosen
        .iter()
        .map(|(_, hash)| hash.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let missing: Vec<String> = (hashes.iter())
        .filter(|h| !ImageStore::image_file(out, h).is_file())
        .cloned()
        .collect();
    if !missing.is_empty() {
        materialise_images_for(run, pipeline, at, &missing, out)?;
    }
    Ok(chosen
        .into_iter()
        .map(|(label, hash)| Base {
            saved: read_state(&run.state(&hash)),
            label,
            hash,
        })
        .collect())
}

/// Writes the images `hashes` of the run as `<hash>.img` in `out`: its crash images, or
/// fully persisted images (another replay).
fn materialise_images_for(
    run: &RunDir,
    pipeline: &PipelineOptions,
    at: FaultsAt,
    hashes: &[String],
    out: &Path,
) -> Result<()> {
    if at == FaultsAt::FailurePoints {
        materialise_images(run, hashes, out)?;
        return Ok(());
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let options = GenerateOptions {
        guidance: Guidance::FullyPersisted,
        store: None,
        from_checkpoint: None,
        materialise: Some((hashes.iter().cloned().collect(), out.to_path_buf())),
        ..generate_options(pipeline, PathBuf::new())
    };
    generate_images(&options, &run.trace(), |_| Ok(()), &mut (), &mut |_| {})?;
    Ok(())
}

/// The fully persisted image of each checkpoint's hypercall, and of the last failure point.
#[derive(Default)]
struct FullyPersisted {
    checkpoints: BTreeMap<u64, String>,
    last: Option<String>,
}

impl PointSink for FullyPersisted {
    fn point(&mut self, point: &PointRecord) -> io::Result<()> {
        let Some(image) = point.images.first() else {
            return Ok(());
        };
        if let (FailureKind::Checkpoint, Some(checkpoint)) = (point.kind, point.checkpoint) {
            self.checkpoints
                .entry(checkpoint)
                .or_insert_with(|| image.clone());
        }
        self.last = Some(image.clone());
        Ok(())
    }
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", dir.display()))
        }
        _ => Ok(()),
    }
}
