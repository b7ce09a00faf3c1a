//! `persim debug lines|at DIR`: look into a run's trace through the crash model.

use crate::size::parse_size;
use anyhow::Result;
use clap::Subcommand;
use persim_analyze::{Media, StateInfo};
use persim_image::{ImagesIndex, PointReads, PointRecord};
use persim_inspect::{entries_touching, pending_at};
use persim_model::{CacheMode, Config};
use persim_tester::{materialise_images, RunDir};
use persim_trace::{Reader, Symbols};
use std::path::{Path, PathBuf};

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
            let symbols = Symbols::of_trace(&trace);
            let found = entries_touching(Reader::open(&trace)?, lines, symbols.as_ref())?;
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
            let trace = RunDir::trace_of(dir);
            let reader = Reader::open(&trace)?;
            let mut config = Config::of_header(&reader.header());
            config.cache = match cache {
                Some(cache) => *cache,
                None => RunDir::recorded_cache(dir)?,
            };
            let disk = config.blk_size > 0;
            let mut state = pending_at(reader, config, *index)?;
            if let Some(symbols) = Symbols::of_trace(&trace) {
                state.describe_code(Reader::open(&trace)?, &symbols)?;
            }
            let point = point_at(dir, *index);
            let followed = |lines: fn(&PointRecord) -> &Vec<u64>| {
                point.as_ref().map(lines).filter(|l| !l.is_empty()).cloned()
            };
            let runtime = followed(|p| &p.runtime_lines);
            let outside = followed(|p| &p.outside_program_lines);
            let reads = point.and_then(|p| p.reads);
            let states = states_at(dir, *index).filter(|_| disk);
            if *json {
                let mut value = serde_json::to_value(&state)?;
                if let Some(object) = value.as_object_mut() {
                    if let Some(reads) = &reads {
                        object.insert("reads".into(), serde_json::to_value(reads)?);
                    }
                    if let Some(runtime) = &runtime {
                        object.insert("runtime_lines".into(), serde_json::to_value(runtime)?);
                    }
                    if let Some(outside) = &outside {
                        object.insert(
                            "outside_program_lines".into(),
                            serde_json::to_value(outside)?,
                        );
                    }
                    if let Some(states) = &states {
                        object.insert("states".into(), states_json(states));
                    }
                }
                outln!("{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                out!("{}", state.to_text())?;
                if let Some(reads) = &reads {
                    out!("{}", reads_text(reads))?;
                }
                if let Some(runtime) = &runtime {
                    outln!(
                        "run-time data the program declared (followed the cut, not explored): {}",
                        all_lines(runtime)
                    )?;
                }
                if let Some(outside) = &outside {
                    outln!(
                        "outside the program's PM (the kernel's; followed the cut, not \
                         explored): {}",
                        all_lines(outside)
                    )?;
                }
                if let Some(states) = &states {
                    outln!("{}", states_text(*index, states))?;
                }
            }
        }
    }
    Ok(())
}

/// How `--strategy reads` chose the images of the failure point at `index` of a run
/// directory, if it did.
fn point_at(dir: &Path, index: u64) -> Option<PointRecord> {
    let run = RunDir::new(dir);
    let images = ImagesIndex::read(&run.images_index()).ok()?;
    images.failure_points.into_iter().find(|p| p.index == index)
}

/// The states of a run directory's report that arise at the failure point at `index`
/// (a checkpoint's belongs to two intervals), if it has a report.
fn states_at(dir: &Path, index: u64) -> Option<Vec<StateInfo>> {
    let report = RunDir::new(dir).read_report().ok()?;
    let states = report.checkpoints.into_iter().flat_map(|c| c.states);
    Some(
        states
            .filter(|s| s.failure_points.contains(&index))
            .collect(),
    )
}

/// `states at failure point 57: c1s1 (from the disk), c1s2`.
fn states_text(index: u64, states: &[StateInfo]) -> String {
    let names: Vec<String> = states
        .iter()
        .map(|s| match Media::describe(&s.media) {
            Some(media) => format!("{} ({media})", s.name),
            None => s.name.clone(),
        })
        .collect();
    match names.is_empty() {
        true => format!("no state of the report arises just before entry {index}"),
        false => format!("states at failure point {index}: {}", names.join(", ")),
    }
}

fn states_json(states: &[StateInfo]) -> serde_json::Value {
    let states: Vec<serde_json::Value> = states
        .iter()
        .map(|s| serde_json::json!({"name": s.name, "outcome": s.outcome, "media": s.media}))
        .collect();
    serde_json::Value::Array(states)
}

/// Every line, `0x40 0x80`, or `none` (reports abbreviate; debugging shows all).
fn all_lines(lines: &[u64]) -> String {
    match lines {
        [] => "none".to_owned(),
        lines => lines
            .iter()
            .map(|l| format!("{l:#x}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn reads_text(reads: &PointReads) -> String {
    let known = if reads.known {
        "its recovery traced"
    } else {
        "its recovery crashed or hung, so every dirty line is explored"
    };
    format!(
        "reads: the fully persisted image {} ({known})\n  explored: {}\n  \
         explored because the previous failure point's recovery read them: {}\n  \
         skipped (recovery does not read them): {}\n",
        reads.fully_persisted,
        all_lines(&reads.lines.explored),
        all_lines(&reads.lines.from_previous),
        all_lines(&reads.lines.skipped),
    )
}
