//! `persim trace print|pack`: show a trace as text, or pack it into the binary form.

use anyhow::{Context, Result};
use clap::Subcommand;
use persim_trace::{BinaryWriter, Reader, TextWriter};
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::PathBuf;

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
            let tmp = out.with_extension("tmp");
            let file =
                File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
            let mut writer = BinaryWriter::new(BufWriter::new(file), &reader.header())?;
            let mut entries = 0u64;
            for entry in reader {
                writer.write(&entry?)?;
                entries += 1;
            }
            writer
                .finish()?
                .into_inner()
                .map_err(|e| e.into_error())?
                .sync_all()?;
            fs::rename(&tmp, out).with_context(|| format!("cannot create {}", out.display()))?;
            eprintln!(
                "packed {entries} entries: {} -> {} ({} bytes)",
                text.display(),
                out.display(),
                fs::metadata(out)?.len()
            );
        }
    }
    Ok(())
}
