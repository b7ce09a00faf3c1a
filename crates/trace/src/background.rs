//! Writing a binary trace on a thread of its own, so that the tracer's hot path only
//! appends to a vector.

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::atomic_file::temporary_path;
use crate::binary::BinaryWriter;
use crate::entry::{Entry, Header};

/// Entries handed to the writer thread (or from the reader thread) at once; large enough that channel costs vanish,
/// small enough that a batch is a few hundred KiB.
pub(crate) const BATCH_LEN: usize = 4096;
/// Batches in flight. The producer waits only when the writer falls this far behind.
const CHANNEL_BATCHES: usize = 16;

/// A binary trace writer fed from the producer's thread and writing on its own.
/// The trace goes to a temporary name beside PATH (`.PATH.tmp-<pid>-<n>`) and is renamed to `PATH` by [`BackgroundWriter::finish`],
/// so an interrupted run never leaves a partial trace under the final name.
pub struct BackgroundWriter {
    batch: Vec<Entry>,
    /// `None` once the writer thread has hung up after an error; `finish` reports it.
    batches: Option<SyncSender<Vec<Entry>>>,
    /// Emptied batches coming back, so the producer does not allocate a vector per batch.
    spares: Receiver<Vec<Entry>>,
    thread: JoinHandle<io::Result<()>>,
    tmp_path: PathBuf,
    path: PathBuf,
}

impl BackgroundWriter {
    /// Creates the temporary file, writes the header and starts the writer thread.
    pub fn spawn(path: &Path, header: &Header) -> io::Result<Self> {
        let tmp_path = temporary_path(path)?;
        let file = File::create(&tmp_path).map_err(|e| with_path(e, &tmp_path))?;
        let writer = BinaryWriter::new(BufWriter::new(file), header)?;
        let (batches, batch_rx) = mpsc::sync_channel(CHANNEL_BATCHES);
        let (spare_tx, spares) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("persim-trace-writer".to_owned())
            .spawn(move || write_batches(writer, batch_rx, spare_tx))?;
        Ok(BackgroundWriter {
            batch: Vec::with_capacity(BATCH_LEN),
            batches: Some(batches),
            spares,
            thread,
            tmp_path,
            path: path.to_owned(),
        })
    }

    /// Queues one entry. Errors of the writer thread surface in [`BackgroundWriter::finish`].
    pub fn send(&mut self, entry: Entry) {
        self.batch.push(entry);
        if self.batch.len() >= BATCH_LEN {
            self.send_batch();
        }
    }

    fn send_batch(&mut self) {
        let spare = self
            .spares
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH_LEN));
        let full = std::mem::replace(&mut self.batch, spare);
        if let Some(batches) = &self.batches {
            if batches.send(full).is_err() {
                // The thread stopped on an error; drop entries until `finish` reports it.
                self.batches = None;
            }
        }
    }

    /// Writes the remaining entries, waits for the thread and renames the trace to its
    /// final name. Returns the first I/O error of the thread, naming the file.
    pub fn finish(mut self) -> io::Result<()> {
        if !self.batch.is_empty() {
            self.send_batch();
        }
        drop(self.batches.take());
        let result = self
            .thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the trace writer thread panicked")));
        match result {
            Ok(()) => fs::rename(&self.tmp_path, &self.path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot rename {} to {}: {e}",
                        self.tmp_path.display(),
                        self.path.display()
                    ),
                )
            }),
            Err(e) => Err(with_path(e, &self.tmp_path)),
        }
    }
}

fn write_batches(
    mut writer: BinaryWriter<BufWriter<File>>,
    batches: Receiver<Vec<Entry>>,
    spares: mpsc::Sender<Vec<Entry>>,
) -> io::Result<()> {
    for mut batch in batches {
        for entry in &batch {
            writer.write(entry)?;
        }
        batch.clear();
        // The producer may have finished and stopped taking spares back.
        let _ = spares.send(batch);
    }
    let file = writer.finish()?.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
