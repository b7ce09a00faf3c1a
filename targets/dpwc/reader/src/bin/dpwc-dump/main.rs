//! `dpwc-dump`: what a DPWC cache holds and what recovery would replay from it.

mod text;

use clap::Parser;
use dpwc_reader::{Cache, ExtentSummary};
use serde::Serialize;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code for an image that cannot be read or is not a DPWC cache.
const EXIT_BAD_INPUT: u8 = 2;

#[derive(Parser)]
#[command(
    name = "dpwc-dump",
    version,
    about = "Print what a DPWC cache (dm-dpwc's PM device, or a crash image of it) holds",
    long_about = "Reads a DPWC cache as dm-dpwc's recovery does (layout version 2, docs/design/dpwc.md) \
                  and prints: the superblock, every generation with its id and chunk counters \
                  (held or damaged ones marked), the valid entries of each live generation's \
                  chunks, each damaged entry with its reason (a damaged body costs that entry; \
                  a bad magic, length, header checksum or an end past `used` stops its chunk), \
                  and what replay writes to the origin, in (generation id, entry id) order.\n\n\
                  Examples:\n  \
                  dpwc-dump /dev/pmem0\n  \
                  dpwc-dump crash.img --json | jq .replay\n\n\
                  Exit codes: 0 the image was read (corrupt entries included), 2 it could \
                  not be read or is not a DPWC cache."
)]
struct Args {
    /// The PM device or an image of it (a file of the device's size).
    image: PathBuf,
    /// JSON for programs instead of text.
    #[arg(long)]
    json: bool,
    /// Also print each valid entry's data, in hex.
    #[arg(long)]
    data: bool,
}

/// What replay writes to the origin, for the JSON output.
#[derive(Serialize)]
struct ReplaySummary {
    /// (generation id, entry id) of every valid entry, in replay order.
    order: Vec<(u64, u64)>,
    writes: usize,
    discards: usize,
    written_sectors: u64,
    discarded_sectors: u64,
    /// The origin's sectors as replay leaves them.
    extents: Vec<ExtentSummary>,
    /// (generation id, entry id) pairs that several valid entries carry.
    duplicate_ids: Vec<(u64, u64)>,
}

impl ReplaySummary {
    fn of(cache: &Cache) -> Self {
        let order = cache.replay_order();
        let discards = order.iter().filter(|e| e.header.is_discard()).count();
        let map = cache.replay();
        Self {
            order: order.iter().map(|e| (e.gen_id, e.header.id)).collect(),
            writes: order.len() - discards,
            discards,
            written_sectors: map.written(),
            discarded_sectors: map.discarded(),
            extents: map.extents().map(|e| e.summary()).collect(),
            duplicate_ids: cache.duplicate_ids(),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let image = match std::fs::read(&args.image) {
        Ok(image) => image,
        Err(e) => return bad_input(&format!("cannot read {}: {e}", args.image.display())),
    };
    let cache = match Cache::parse(&image) {
        Ok(cache) => cache,
        Err(e) => return bad_input(&format!("{}: {e}", args.image.display())),
    };
    let mut out = io::stdout().lock();
    let written = if args.json {
        write_json(&mut out, &cache, args.data)
    } else {
        text::write(&mut out, &cache, &ReplaySummary::of(&cache), args.data)
    };
    match written.and_then(|()| out.flush()) {
        // A reader that went away (`| head`) is not an error of ours.
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("dpwc-dump: cannot write the output: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
        _ => ExitCode::SUCCESS,
    }
}

fn bad_input(message: &str) -> ExitCode {
    eprintln!("dpwc-dump: {message}");
    ExitCode::from(EXIT_BAD_INPUT)
}

fn write_json(out: &mut impl Write, cache: &Cache, data: bool) -> io::Result<()> {
    let mut value = serde_json::to_value(cache)?;
    if data {
        for (g, generation) in cache.generations.iter().enumerate() {
            for (c, chunk) in generation.chunks.iter().enumerate() {
                for (i, entry) in chunk.entries.iter().enumerate() {
                    value["generations"][g]["chunks"][c]["entries"][i]["data"] =
                        hex(entry.data).into();
                }
            }
        }
    }
    value["replay"] = serde_json::to_value(ReplaySummary::of(cache))?;
    serde_json::to_writer_pretty(&mut *out, &value)?;
    writeln!(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
