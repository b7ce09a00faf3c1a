//! Decoding a trace on a thread of its own while the caller works through the entries
//! decoded before ([`Reader::read_ahead`]): on two cores, decoding (zstd and the binary
//! codec) and a one-pass analysis overlap instead of taking turns.

use std::sync::mpsc::{self, Receiver, SyncSender};

use crate::background::BATCH_LEN;
use crate::entry::Entry;
use crate::error::TraceError;
use crate::reader::Reader;

/// Batches decoded ahead of the consumer: enough to ride out its slow moments.
const BATCHES_AHEAD: usize = 8;

type Batch = Vec<Result<Entry, TraceError>>;

/// The entries of a [`Reader`], decoded on another thread; the same items in the same
/// order, ending after the first error. Dropping it early stops the decoding thread.
pub struct ReadAhead {
    batches: Receiver<Batch>,
    current: std::vec::IntoIter<Result<Entry, TraceError>>,
}

impl Reader {
    /// Decodes this trace on a thread of its own, [`BATCH_LEN`] entries at a time.
    pub fn read_ahead(self) -> ReadAhead {
        let (sender, batches) = mpsc::sync_channel(BATCHES_AHEAD);
        // A thread that cannot be started is the first item the consumer gets.
        let thread = std::thread::Builder::new()
            .name("persim-trace-reader".to_owned())
            .spawn({
                let sender = sender.clone();
                move || decode_into(self, &sender)
            });
        if let Err(e) = thread {
            let _ = sender.send(vec![Err(TraceError::from(e))]);
        }
        ReadAhead {
            batches,
            current: Vec::new().into_iter(),
        }
    }
}

fn decode_into(mut reader: Reader, batches: &SyncSender<Batch>) {
    loop {
        let batch: Batch = reader.by_ref().take(BATCH_LEN).collect();
        // An empty batch is the end; a closed channel, a consumer that stopped.
        if batch.is_empty() || batches.send(batch).is_err() {
            return;
        }
    }
}

impl Iterator for ReadAhead {
    type Item = Result<Entry, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.current.next() {
                return Some(item);
            }
            self.current = self.batches.recv().ok()?.into_iter();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::synthetic::{FsLike, PM_SIZE};
    use crate::{write_binary_file, Header, Reader};

    fn synthetic_trace(path: &std::path::Path, entries: usize) {
        let header = Header {
            pm_size: PM_SIZE,
            ..Header::default()
        };
        write_binary_file(path, &header, FsLike::new(7, true).take(entries).map(Ok)).unwrap();
    }

    #[test]
    fn read_ahead_gives_the_entries_of_the_reader_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.ptrace");
        synthetic_trace(&path, 3 * super::BATCH_LEN + 17);
        let direct: Vec<_> = Reader::open(&path).unwrap().map(Result::unwrap).collect();
        let ahead: Vec<_> = Reader::open(&path)
            .unwrap()
            .read_ahead()
            .map(Result::unwrap)
            .collect();
        assert_eq!(direct.len(), 3 * super::BATCH_LEN + 17);
        assert_eq!(ahead, direct);
    }

    #[test]
    fn read_ahead_ends_after_the_first_error_as_the_reader_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.trace");
        std::fs::write(
            &path,
            "write 0x0 01\nfence sfence\nwrite 0x8 zz\nwrite 0x0 02\n",
        )
        .unwrap();
        let items: Vec<_> = Reader::open(&path).unwrap().read_ahead().collect();
        assert_eq!(items.len(), 3, "{items:?}");
        assert!(items[..2].iter().all(Result::is_ok));
        let error = items[2].as_ref().unwrap_err().to_string();
        assert!(
            error.contains("t.trace") && error.contains("entry 2"),
            "{error}"
        );
    }

    #[test]
    fn a_consumer_that_stops_early_stops_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.ptrace");
        synthetic_trace(&path, 20 * super::BATCH_LEN);
        let first: Vec<_> = Reader::open(&path).unwrap().read_ahead().take(5).collect();
        assert_eq!(first.len(), 5);
        // The thread ends on its next send: nothing to assert but that this returns.
    }
}
