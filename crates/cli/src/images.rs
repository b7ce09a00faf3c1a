//! `persim images`: replay a trace through the crash model and materialise crash images.

use crate::progress::Progress;
use crate::size::parse_size;
use anyhow::{bail, Context, Result};
use clap::Args;
use persim_image::{Image, ImageStore, DEFAULT_HASH_LEVEL};
use persim_model::{CacheMode, Config, FailurePoint, FailureView, Origin, Replay, Sink, Strategy};
use persim_trace::{initial_image_path, Reader};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
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
    /// Only failure points from checkpoint N on (those a checkpoint interval judges);
    /// earlier entries are replayed, but their failure points give no images.
    #[arg(long, value_name = "N")]
    pub from_checkpoint: Option<u64>,
    /// Hash memo granularity: chaining values are kept for subtrees of 2^LEVEL KiB, so
    /// re-hashing an image after a small change reads only the changed subtrees.
    #[arg(long, default_value_t = DEFAULT_HASH_LEVEL, value_name = "LEVEL")]
    pub hash_level: u32,
    /// Initial PM contents (then the block device's); default: TRACE.initial, which
    /// `persim trace` writes, else zeros.
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

pub fn run(args: &ImagesArgs) -> Result<()> {
    generate(args, io::stdout().lock())
}

/// Replays the trace and writes the table or the JSON object to `out`.
pub fn generate(args: &ImagesArgs, out: impl Write) -> Result<()> {
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
    let initial = args.initial.clone().or_else(|| {
        let recorded = initial_image_path(&args.trace);
        recorded.is_file().then_some(recorded)
    });
    let persisted = match &initial {
        Some(path) => Image::from_file(path, config.image_len())
            .with_context(|| format!("reading the initial image {}", path.display()))?,
        None => Image::zeroed(config.image_len()),
    }
    .with_hash_level(args.hash_level)?;
    let store = args.out.as_ref().map(ImageStore::open).transpose()?;
    let mut output = Output::new(args.json, out);
    if !args.json {
        output.title(&args.trace, &config)?;
    }
    let mut sink = ImageSink {
        persisted,
        store,
        hex: args.hex,
        from_checkpoint: args.from_checkpoint,
        output,
        images: BTreeMap::new(),
        points: 0,
        incomplete: 0,
        index_saved: Instant::now(),
    };
    let mut progress = Progress::new(!args.quiet);
    let mut replay = Replay::new(config);
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
    sink.finish(entries, progress.elapsed())
}

/// Keeps the persisted image, materialises each crash image on top of it, records it and
/// writes each failure point out as soon as it is done, so memory does not grow with the
/// trace: only the distinct images are remembered.
struct ImageSink<W: Write> {
    persisted: Image,
    store: Option<ImageStore>,
    hex: bool,
    /// Failure points before this checkpoint (`None` sorts first) are skipped.
    from_checkpoint: Option<u64>,
    output: Output<W>,
    /// Distinct images, with their contents as hex when asked for.
    images: BTreeMap<[u8; 32], Option<String>>,
    points: u64,
    incomplete: u64,
    index_saved: Instant,
}

/// How often the store's index is saved during a run, so an interrupted run can resume.
const INDEX_SAVE_INTERVAL: Duration = Duration::from_secs(10);

impl<W: Write> Sink for ImageSink<W> {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.persisted.write(offset, bytes);
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        if view.point.checkpoint < self.from_checkpoint {
            return Ok(());
        }
        let crash = view.crash_images();
        let mut hashes = Vec::new();
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
            if !hashes.contains(&hash) {
                hashes.push(hash);
            }
            let hex = self.hex;
            self.images
                .entry(*hash.as_bytes())
                .or_insert_with(|| hex.then(|| to_hex(&contents)));
        }
        self.points += 1;
        self.incomplete += u64::from(crash.incomplete);
        self.output.point(&view.point, &hashes, crash.incomplete)?;
        if let Some(store) = &self.store {
            if self.index_saved.elapsed() >= INDEX_SAVE_INTERVAL {
                store.flush_index()?;
                self.index_saved = Instant::now();
            }
        }
        Ok(())
    }
}

impl<W: Write> ImageSink<W> {
    fn describe(&self, entries: u64) -> String {
        format!(
            "{entries} entries replayed, {} failure points, {} distinct images",
            self.points,
            self.images.len()
        )
    }

    fn finish(mut self, entries: u64, took: Duration) -> Result<()> {
        match &mut self.output {
            Output::Json { out, .. } => {
                let images: serde_json::Map<String, serde_json::Value> = self
                    .images
                    .iter()
                    .map(|(hash, hex)| {
                        let mut fields = serde_json::Map::new();
                        if let Some(hex) = hex {
                            fields.insert("hex".into(), hex.clone().into());
                        }
                        (
                            blake3::Hash::from(*hash).to_hex().to_string(),
                            fields.into(),
                        )
                    })
                    .collect();
                writeln!(out, "],\"images\":{}}}", serde_json::Value::Object(images))?;
            }
            Output::Text(out) => {
                writeln!(
                    out,
                    "{} entries, {} failure points, {} distinct images{} in {:.2}s",
                    entries,
                    self.points,
                    self.images.len(),
                    if self.incomplete > 0 {
                        format!(", {} failure points sampled", self.incomplete)
                    } else {
                        String::new()
                    },
                    took.as_secs_f64()
                )?;
                if let Some(store) = &self.store {
                    writeln!(
                        out,
                        "images stored in {} (index.json names their origins)",
                        store.dir().display()
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// Where failure points go as they are done: a table for people or the JSON contract
/// `{"failure_points": [...], "images": {...}}`, written incrementally.
enum Output<W: Write> {
    Text(W),
    Json { out: W, first: bool },
}

impl<W: Write> Output<W> {
    fn new(json: bool, out: W) -> Self {
        if json {
            Output::Json { out, first: true }
        } else {
            Output::Text(out)
        }
    }

    fn title(&mut self, trace: &Path, config: &Config) -> io::Result<()> {
        if let Output::Text(out) = self {
            let blk = if config.blk_size > 0 {
                format!(", block device {:#x} bytes", config.blk_size)
            } else {
                String::new()
            };
            writeln!(
                out,
                "{}: PM {:#x} bytes{blk}, cache {}, strategy {}",
                trace.display(),
                config.pm_size,
                config.cache,
                config.strategy
            )?;
            writeln!(
                out,
                "{:>10}  {:<10}  {:>10}  {:>7}",
                "index", "kind", "checkpoint", "images"
            )?;
        }
        Ok(())
    }

    fn point(
        &mut self,
        p: &FailurePoint,
        hashes: &[blake3::Hash],
        incomplete: bool,
    ) -> io::Result<()> {
        match self {
            Output::Text(out) => writeln!(
                out,
                "{:>10}  {:<10}  {:>10}  {:>7}{}",
                p.index,
                p.kind.to_string(),
                p.checkpoint.map_or("-".to_string(), |c| c.to_string()),
                hashes.len(),
                if incomplete {
                    "  (sampled: more than --max-images)"
                } else {
                    ""
                }
            ),
            Output::Json { out, first } => {
                let point = serde_json::json!({
                    "index": p.index,
                    "kind": p.kind,
                    "checkpoint": p.checkpoint,
                    "images": hashes.iter().map(|h| h.to_hex().to_string()).collect::<Vec<_>>(),
                    "incomplete": incomplete,
                });
                let sep = if *first { "{\"failure_points\":[" } else { "," };
                *first = false;
                write!(out, "{sep}{point}")
            }
        }
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
