//! `persim trace print|pack`: show a trace as text, or pack it into the binary form.

use anyhow::Result;
use clap::Subcommand;
use persim_trace::synthetic::{self, FsLike};
use persim_trace::{write_binary_file, Header, Reader, Symbols, TextWriter};
use std::fs;
use std::io::{self, BufWriter};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Print a trace (text or binary) as text, one entry per line.
    Print {
        /// Trace file, text or binary (detected by content).
        file: PathBuf,
        /// Leave out the `# function+0xoff [module] < caller…` comment that follows each
        /// entry of a recorded trace (from the symbols saved beside it, TRACE.symbols).
        #[arg(long)]
        no_symbols: bool,
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
        /// Threads (two per process) that take turns, each switch marked as the tracer
        /// marks it (for `persim profile --by process`); 0: no threads recorded.
        #[arg(long, default_value_t = 0)]
        tasks: u32,
        /// Where to write the binary trace (written atomically).
        #[arg(short, long)]
        out: PathBuf,
    },
}

pub fn run(command: &TraceCommand) -> Result<()> {
    match command {
        TraceCommand::Print { file, no_symbols } => {
            let reader = Reader::open(file)?;
            let symbols = (!no_symbols).then(|| Symbols::of_trace(file)).flatten();
            let mut writer =
                TextWriter::new(BufWriter::new(io::stdout().lock()), &reader.header())?;
            for entry in reader {
                let entry = entry?;
                match symbols.as_ref().and_then(|s| s.describe_meta(&entry.meta)) {
                    Some(code) => writer.write_with_comment(&entry, &code)?,
                    None => writer.write(&entry)?,
                }
            }
            writer.finish()?;
        }
        TraceCommand::Pack { text, out } => {
            let reader = Reader::open(text)?;
            let header = reader.header();
            let entries = write_binary_file(out, &header, reader)?;
            say!(
                "packed {entries} entries: {} -> {} ({} bytes)",
                text.display(),
                out.display(),
                fs::metadata(out)?.len()
            );
        }
        TraceCommand::Synth {
            entries,
            seed,
            tasks,
            out,
        } => {
            let header = Header {
                pm_size: synthetic::PM_SIZE,
                flags: if *tasks > 0 { Header::FLAG_TASKS } else { 0 },
                ..Header::default()
            };
            let generated = FsLike::new(*seed, false)
                .with_tasks(*tasks)
                .take(*entries as usize)
                .map(Ok);
            write_binary_file(out, &header, generated)?;
        }
    }
    Ok(())
}
