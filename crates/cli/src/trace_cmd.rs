//! `persim trace print|pack`: show a trace as text, or pack it into the binary form.

use anyhow::{Context, Result};
use clap::Subcommand;
use persim_trace::synthetic::{self, FsLike};
use persim_trace::{BinaryWriter, Entry, Header, Reader, TextWriter, TraceError};
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Print a trace (text or binary) as text, one entry per line.
    Print {
        /// Trace file, text or binary (detected by content).
        file: PathBuf,
    },
    /// Pack a trace (usually text) into the compact, compressed binary form.
    Pack {
        /// Trace file, text or binary (detected by content).
        text: PathBuf,
        /// Where to write the binary trace (written atomically).
        #[arg(short, long)]
        out: PathBuf,
    },
    /// Write a synthetic file-system-like binary trace (small metadata stores with clwb +
    /// sfence, NT data copies, journal commits, checkpoints), for benchmarks.
    Synth {
        /// Number of entries.
        #[arg(long, default_value_t = 1_000_000)]
        entries: u64,
        /// Seed of the generator (same seed, same trace).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where to write the binary trace (written atomically).
        #[arg(short, long)]
        out: PathBuf,
    },
}

pub fn run(command: &TraceCommand) -> Result<()> {
    match command {
        TraceCommand::Print { file } => {
            let reader = Reader::open(file)?;
            let mut writer =
                TextWriter::new(BufWriter::new(io::stdout().lock()), &reader.header())?;
            for entry in reader {
                writer.write(&entry?)?;
            }
            writer.finish()?;
        }
        TraceCommand::Pack { text, out } => {
            let reader = Reader::open(text)?;
            let header = reader.header();
            let entries = write_binary(out, &header, reader)?;
            eprintln!(
                "packed {entries} entries: {} -> {} ({} bytes)",
                text.display(),
                out.display(),
                fs::metadata(out)?.len()
            );
        }
        TraceCommand::Synth { entries, seed, out } => {
            let header = Header {
                pm_size: synthetic::PM_SIZE,
                ..Header::default()
            };
            let generated = FsLike::new(*seed, false).take(*entries as usize).map(Ok);
            write_binary(out, &header, generated)?;
        }
    }
    Ok(())
}

/// Writes `entries` as a binary trace to `out`, atomically (a temporary file, synced and
/// renamed); returns the entry count.
fn write_binary(
    out: &Path,
    header: &Header,
    entries: impl Iterator<Item = Result<Entry, TraceError>>,
) -> Result<u64> {
    let tmp = out.with_extension("tmp");
    let written = (|| -> Result<u64> {
        let file =
            File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut writer = BinaryWriter::new(BufWriter::new(file), header)?;
        let mut count = 0u64;
        for entry in entries {
            writer.write(&entry?)?;
            count += 1;
        }
        writer
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()?;
        Ok(count)
    })();
    match written {
        Ok(count) => {
            fs::rename(&tmp, out).with_context(|| format!("cannot create {}", out.display()))?;
            Ok(count)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}
