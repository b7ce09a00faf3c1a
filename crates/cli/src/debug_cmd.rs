//! `persim debug lines|at DIR`: look into a run's trace through the crash model.

use crate::size::parse_size;
use anyhow::Result;
use clap::Subcommand;
use persim_analyze::{entries_touching, pending_at};
use persim_model::{CacheMode, Config};
use persim_tester::{materialise_images, RunDir};
use persim_trace::Reader;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum DebugCommand {
    /// Every entry that stores to or flushes the given cache lines, with the fences and
    /// hypercalls between them.
    Lines {
        /// A run directory, or a trace file.
        dir: PathBuf,
        /// Line addresses (PM offsets; any byte of a line names it), comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = parse_size, required = true)]
        lines: Vec<u64>,
    },
    /// Make crash images of a run again from its trace (a run keeps only their states,
    /// unless --keep-images): writes OUT/<hash>.img for each hash, as `b3sum` names it.
    Image {
        /// A run directory.
        dir: PathBuf,
        /// Image hashes, as report.json and `persim report --failure-points` name them.
        #[arg(long = "hash", value_delimiter = ',', required = true)]
        hashes: Vec<String>,
        /// Where to write them.
        #[arg(short, long, default_value = ".")]
        out: PathBuf,
    },
    /// The crash model's pending state just before entry INDEX: dirty lines, their
    /// pending stores in order, flush marks.
    At {
        /// A run directory, or a trace file.
        dir: PathBuf,
        #[arg(long)]
        index: u64,
        /// The cache mode to replay with [default: the run directory's, else volatile].
        #[arg(long)]
        cache: Option<CacheMode>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: &DebugCommand) -> Result<()> {
    match command {
        DebugCommand::Image { dir, hashes, out } => {
            for path in materialise_images(&RunDir::new(dir), hashes, out)? {
                outln!("{}", path.display())?;
            }
        }
        DebugCommand::Lines { dir, lines } => {
            let trace = RunDir::trace_of(dir);
            let found = entries_touching(Reader::open(&trace)?, lines)?;
            if found.is_empty() {
                let lines: Vec<String> = lines.iter().map(|l| format!("{l:#x}")).collect();
                say!(
                    "no entry of {} stores to, reads or flushes line(s) {} (PM offsets)",
                    trace.display(),
                    lines.join(", ")
                );
            }
            for line in found {
                outln!("{line}")?;
            }
        }
        DebugCommand::At {
            dir,
            index,
            cache,
            json,
        } => {
            let reader = Reader::open(&RunDir::trace_of(dir))?;
            // a hand-written trace may not say its PM size; any size holds its stores
            let pm_size = Some(reader.header().pm_size).filter(|&s| s > 0);
            let mut config = Config::new(pm_size.unwrap_or(u64::MAX / 2));
            config.cache = match cache {
                Some(cache) => *cache,
                None => RunDir::recorded_cache(dir)?,
            };
            let state = pending_at(reader, config, *index)?;
            if *json {
                outln!("{}", serde_json::to_string_pretty(&state)?)?;
            } else {
                out!("{}", state.to_text())?;
            }
        }
    }
    Ok(())
}
