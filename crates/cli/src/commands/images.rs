//! `persim images`: replay a trace through the crash model and materialise crash images.

use crate::progress::Progress;
use crate::size::parse_size;
use anyhow::{bail, Result};
use clap::Args;
use persim_image::{
    generate_images, GenerateOptions, Generated, Guidance, ImagesJsonWriter, PointRecord,
    PointSink, Points, DEFAULT_HASH_LEVEL,
};
use persim_model::{CacheMode, Config, Scope, Strategy};
use persim_tester::{recorded_guidance, Event, Observer, RunDir};
use std::io::{self, Write};
use std::path::PathBuf;

/// Generate the crash images a trace can leave on persistent memory.
///
/// Replays TRACE through the crash model (docs/design/model.md) and, at every failure point
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
    /// exhaustive: the model's exact set (sampled above --max-images); global-prefix: the
    /// thesis strategy; program-order: nothing/everything pending; reads: global-prefix
    /// over the lines recovery reads (see --reads-from); fast: one image per new flush or
    /// fence; single-line: each dirty line alone persisted or alone lost. --help says what
    /// each cannot find.
    #[arg(long, default_value = "exhaustive", long_help = super::STRATEGIES)]
    pub strategy: Strategy,
    /// With --strategy reads: the run directory of a `persim run --strategy reads` of this
    /// trace, whose traced recoveries say which lines to explore (without it, reads
    /// explores every dirty line, as global-prefix).
    #[arg(long, value_name = "RUN_DIR")]
    pub reads_from: Option<PathBuf>,
    /// With --strategy reads, global-prefix or single-line: program explores only the dirty
    /// lines that can change what the software recovers to (a PM program's own pages once
    /// it has accessed PM from user space; of ext4 and XFS, the lines their jbd2 journal or
    /// log does not protect while its ordering rules hold; of a libpmemobj pool, the lines
    /// its transaction logs do not restore; of an OpenZFS pool on the block device, no block
    /// write that no uberblock references yet); all explores every dirty line.
    #[arg(long, default_value = "program", value_name = "program|all")]
    pub scope: Scope,
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

impl TryFrom<&ImagesArgs> for GenerateOptions {
    type Error = anyhow::Error;

    fn try_from(a: &ImagesArgs) -> Result<Self> {
        let guidance = match &a.reads_from {
            None => Guidance::Unguided,
            Some(_) if a.strategy != Strategy::Reads => {
                bail!("--reads-from guides only --strategy reads")
            }
            Some(dir) => {
                let guidance = recorded_guidance(&RunDir::new(dir))?;
                if !matches!(&guidance, Guidance::ReadSets(sets, _) if !sets.is_empty()) {
                    bail!(
                        "{} holds no traced recoveries: give the directory of a `persim run \
                         --strategy reads`",
                        dir.display()
                    );
                }
                guidance
            }
        };
        Ok(GenerateOptions {
            pm_size: a.pm_size,
            blk_size: a.blk_size,
            cache: a.cache,
            strategy: a.strategy,
            max_images: a.max_images,
            seed: a.seed,
            from_checkpoint: a.from_checkpoint,
            points: Points::All,
            hash_level: a.hash_level,
            initial: a.initial.clone(),
            store: a.out.clone(),
            hex: a.hex,
            materialise: None,
            guidance,
            scope: a.scope,
        })
    }
}

pub fn run(args: &ImagesArgs) -> Result<()> {
    let out = io::stdout().lock();
    let mut progress = Progress::new("persim images", !args.quiet);
    let options = GenerateOptions::try_from(args)?;
    let progress = &mut |p| progress.event(&Event::replayed(p));
    if args.json {
        let mut writer = ImagesJsonWriter::new(out);
        let generated = generate_images(&options, &args.trace, |_| Ok(()), &mut writer, progress);
        // The JSON stays valid: a failure ends it with an "error" record.
        return match generated {
            Ok(summary) => Ok(writer.finish(&summary.images)?.flush()?),
            Err(e) => {
                let e = anyhow::Error::from(e);
                writer.fail(&format!("{e:#}"))?.flush()?;
                Err(e)
            }
        };
    }
    let mut table = Table(out);
    let summary = generate_images(
        &options,
        &args.trace,
        |config| {
            let blk = if config.blk_size > 0 {
                format!(", block device {:#x} bytes", config.blk_size)
            } else {
                String::new()
            };
            writeln!(
                io::stdout(),
                "{}: PM {:#x} bytes{blk}, cache {}, strategy {}\n{:>10}  {:<10}  {:>10}  {:>7}",
                args.trace.display(),
                config.pm_size,
                config.cache,
                config.strategy,
                "index",
                "kind",
                "checkpoint",
                "images"
            )
        },
        &mut table,
        progress,
    )?;
    table.finish(&summary)
}

/// The failure points as a table for people.
struct Table<W: Write>(W);

impl<W: Write> PointSink for Table<W> {
    fn point(&mut self, p: &PointRecord) -> io::Result<()> {
        writeln!(
            self.0,
            "{:>10}  {:<10}  {:>10}  {:>7}{}",
            p.index,
            p.kind.to_string(),
            p.checkpoint.map_or("-".to_string(), |c| c.to_string()),
            p.images.len(),
            match (p.incomplete, p.space) {
                (false, _) => String::new(),
                (true, Some(n)) => format!("  (sampled from {}: more than --max-images)", count(n)),
                (true, None) => "  (sampled: more than --max-images)".to_string(),
            }
        )
    }
}

impl<W: Write> Table<W> {
    fn finish(mut self, s: &Generated) -> Result<()> {
        writeln!(
            self.0,
            "{} entries, {} failure points, {} distinct images{} in {:.2}s",
            s.entries,
            s.failure_points,
            s.images.len(),
            match (s.incomplete, s.space) {
                (0, _) => String::new(),
                (n, Some(space)) => format!(
                    ", {n} failure points sampled (uncapped, the strategy chooses {} images)",
                    count(space)
                ),
                (n, None) => format!(", {n} failure points sampled"),
            },
            s.took.as_secs_f64()
        )?;
        if let Some(store) = &s.store {
            writeln!(
                self.0,
                "images stored in {} (index.json names their origins)",
                store.display()
            )?;
        }
        Ok(())
    }
}

/// An image count for people: exact up to a trillion, then in powers of ten; "≥ 2^128"
/// where the count saturated.
fn count(n: u128) -> String {
    match n {
        u128::MAX => "≥ 2^128".to_string(),
        n if n < 1_000_000_000_000 => n.to_string(),
        n => format!("{:.2e}", n as f64),
    }
}
