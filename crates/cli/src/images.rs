//! `persim images`: replay a trace through the crash model and materialise crash images.

use crate::progress::Progress;
use crate::size::parse_size;
use anyhow::{bail, Context, Result};
use clap::Args;
use persim_image::{Image, ImageStore};
use persim_model::{
    CacheMode, Config, FailureKind, FailurePoint, FailureView, Origin, Replay, Sink, Strategy,
};
use persim_trace::Reader;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Generate the crash images a trace can leave on persistent memory.
///
/// Replays TRACE through the crash model (shared MODEL.md) and, at every failure point
/// (fences, checkpoints, the end of the trace), chooses crash images with the strategy,
/// hashes them (BLAKE3, as b3sum) and, with --out, stores each distinct image once.
#[derive(Args, Debug)]
pub struct ImagesArgs {
    /// Trace file, text or binary (detected by content).
    pub trace: PathBuf,
    /// PM size in bytes (e.g. 1M, 0x100000); default: the trace header's.
    #[arg(long, value_parser = parse_size)]
    pub pm_size: Option<u64>,
    /// Block-device size in bytes; default: the trace header's (0: no block device).
    #[arg(long, value_parser = parse_size)]
    pub blk_size: Option<u64>,
    /// Whether CPU caches are lost on a crash (volatile) or survive it (persistent, eADR).
    #[arg(long, default_value = "volatile")]
    pub cache: CacheMode,
    /// exhaustive: the model's exact set; global-prefix: the thesis strategy;
    /// program-order: nothing/everything pending, failure points at flushes too.
    #[arg(long, default_value = "exhaustive")]
    pub strategy: Strategy,
    /// Images per failure point above which a seeded random sample is taken (flagged
    /// incomplete).
    #[arg(long, default_value_t = Config::DEFAULT_MAX_IMAGES)]
    pub max_images: usize,
    /// Seed of those samples.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Initial PM contents (then the block device's); zeros when not given.
    #[arg(long)]
    pub initial: Option<PathBuf>,
    /// Store distinct images as DIR/<hash>.img with DIR/index.json naming their origins.
    /// Re-running into the same DIR reuses what is there.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// With --json: include every image's contents as hex.
    #[arg(long, requires = "json")]
    pub hex: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The `--json` output (the CLI contract other tools rely on).
#[derive(Serialize)]
struct ImagesReport {
    failure_points: Vec<PointReport>,
    images: BTreeMap<String, ImageReport>,
}

#[derive(Serialize)]
struct PointReport {
    index: u64,
    kind: FailureKind,
    checkpoint: Option<u64>,
    images: Vec<String>,
    incomplete: bool,
}

#[derive(Serialize, Default)]
struct ImageReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

pub fn run(args: &ImagesArgs) -> Result<()> {
    let reader = Reader::open(&args.trace)?;
    let header = reader.header();
    let Some(pm_size) = args
        .pm_size
        .or((header.pm_size > 0).then_some(header.pm_size))
    else {
        bail!(
            "the PM size of {} is unknown: give --pm-size BYTES (or start the trace with \
             `# persim-trace pm-size=BYTES`)",
            args.trace.display()
        );
    };
    let config = Config {
        cache: args.cache,
        strategy: args.strategy,
        max_images: args.max_images,
        seed: args.seed,
        pm_size,
        blk_size: args.blk_size.unwrap_or(header.blk_size),
    };
    let persisted = match &args.initial {
        Some(path) => Image::from_file(path, config.image_len())
            .with_context(|| format!("reading the initial image {}", path.display()))?,
        None => Image::zeroed(config.image_len()),
    };
    let store = args.out.as_ref().map(ImageStore::open).transpose()?;
    let mut sink = ImageSink {
        persisted,
        store,
        hex: args.hex,
        report: ImagesReport {
            failure_points: Vec::new(),
            images: BTreeMap::new(),
        },
        index_saved: Instant::now(),
    };
    let mut progress = Progress::new(!args.quiet);
    let mut replay = Replay::new(config.clone());
    let mut entries = 0u64;
    for entry in reader {
        replay.step(&entry?, &mut sink)?;
        entries += 1;
        if entries.is_multiple_of(4096) {
            progress.tick(|| sink.describe(entries));
        }
    }
    replay.finish(&mut sink)?;
    if let Some(store) = &sink.store {
        store.flush_index()?;
    }
    let mut out = io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&sink.report)?)?;
    } else {
        write!(
            out,
            "{}",
            sink.table(&args.trace, entries, &config, progress.elapsed())
        )?;
    }
    Ok(())
}

/// Keeps the persisted image, materialises each crash image on top of it and records it.
struct ImageSink {
    persisted: Image,
    store: Option<ImageStore>,
    hex: bool,
    report: ImagesReport,
    index_saved: Instant,
}

/// How often the store's index is saved during a run, so an interrupted run can resume.
const INDEX_SAVE_INTERVAL: Duration = Duration::from_secs(10);

impl Sink for ImageSink {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.persisted.write(offset, bytes);
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        let crash = view.crash_images();
        let mut hashes: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for image in &crash.images {
            let mut contents = self.persisted.clone();
            view.apply(image, |offset, bytes| contents.write(offset, bytes));
            let origin = Origin {
                point: view.point,
                choice: image.choice.clone(),
                block: image.block.clone(),
            };
            let hash = match &mut self.store {
                Some(store) => store.insert(&contents, origin)?,
                None => contents.hash(),
            };
            let key = hash.to_hex().to_string();
            if seen.insert(hash) {
                hashes.push(key.clone());
            }
            let hex = self.hex;
            self.report
                .images
                .entry(key)
                .or_insert_with(|| ImageReport {
                    hex: hex.then(|| to_hex(&contents)),
                });
        }
        let FailurePoint {
            index,
            kind,
            checkpoint,
        } = view.point;
        self.report.failure_points.push(PointReport {
            index,
            kind,
            checkpoint,
            images: hashes,
            incomplete: crash.incomplete,
        });
        if let Some(store) = &self.store {
            if self.index_saved.elapsed() >= INDEX_SAVE_INTERVAL {
                store.flush_index()?;
                self.index_saved = Instant::now();
            }
        }
        Ok(())
    }
}

impl ImageSink {
    fn describe(&self, entries: u64) -> String {
        format!(
            "{entries} entries replayed, {} failure points, {} distinct images",
            self.report.failure_points.len(),
            self.report.images.len()
        )
    }

    /// The human-readable summary: one row per failure point.
    fn table(
        &self,
        trace: &std::path::Path,
        entries: u64,
        config: &Config,
        took: Duration,
    ) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{}: {entries} entries, PM {:#x} bytes{}, cache {}, strategy {}",
            trace.display(),
            config.pm_size,
            if config.blk_size > 0 {
                format!(", block device {:#x} bytes", config.blk_size)
            } else {
                String::new()
            },
            config.cache,
            config.strategy
        );
        let _ = writeln!(
            t,
            "{:>10}  {:<10}  {:>10}  {:>7}",
            "index", "kind", "checkpoint", "images"
        );
        for p in &self.report.failure_points {
            let checkpoint = p.checkpoint.map_or("-".to_string(), |c| c.to_string());
            let _ = writeln!(
                t,
                "{:>10}  {:<10}  {:>10}  {:>7}{}",
                p.index,
                p.kind.to_string(),
                checkpoint,
                p.images.len(),
                if p.incomplete {
                    "  (sampled: more than --max-images)"
                } else {
                    ""
                }
            );
        }
        let incomplete = self
            .report
            .failure_points
            .iter()
            .filter(|p| p.incomplete)
            .count();
        let _ = writeln!(
            t,
            "{} failure points, {} distinct images{} in {:.2}s",
            self.report.failure_points.len(),
            self.report.images.len(),
            if incomplete > 0 {
                format!(", {incomplete} sampled")
            } else {
                String::new()
            },
            took.as_secs_f64()
        );
        if let Some(store) = &self.store {
            let _ = writeln!(
                t,
                "images stored in {} (index.json names their origins)",
                store.dir().display()
            );
        }
        t
    }
}

fn to_hex(image: &Image) -> String {
    let mut bytes = vec![0u8; image.len() as usize];
    image.read(0, &mut bytes);
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
