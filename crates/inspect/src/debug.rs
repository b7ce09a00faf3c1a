//! Trace debugging: what the model holds pending at an entry, and every entry that touches
//! given cache lines.

use persim_model::{Config, FailureView, ModelError, Replay, Sink, LINE};
use persim_trace::{Entry, Op, Symbols, TraceError};
use serde::Serialize;
use std::fmt::Write as _;
use std::io;

/// The crash model's pending state just before an entry.
#[derive(Debug, Serialize)]
pub struct PendingState {
    pub index: u64,
    pub lines: Vec<PendingLine>,
    /// The disk's writes since its last flush, in trace order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disk_writes: Vec<PendingDiskWrite>,
}

/// A `blkwrite` not yet made durable by a `blkflush`.
#[derive(Debug, Serialize)]
pub struct PendingDiskWrite {
    pub entry: u64,
    /// Byte offset into the disk.
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug, Serialize)]
pub struct PendingLine {
    pub line: u64,
    /// Units up to this position are flushed (made durable by the next fence).
    pub flush_mark: usize,
    /// The pending sequence in program order.
    pub units: Vec<PendingUnit>,
}

#[derive(Debug, Serialize)]
pub struct PendingUnit {
    pub addr: u64,
    pub bytes: String,
    pub nt: bool,
    /// The trace entry that stored it.
    pub entry: u64,
    /// Its position in the global store order.
    pub order: u64,
    /// The storing code, `function+0xoff [module] < caller …` (`describe_code`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// Something went wrong reading or replaying the trace. The message is the trace's or the
/// model's own, so neither is also the source (a chain would repeat it).
#[derive(Debug, thiserror::Error)]
pub enum DebugError {
    #[error("{0}")]
    Trace(TraceError),
    #[error("{0}")]
    Model(ModelError),
    /// The index asked for is past the end of the trace.
    #[error(
        "entry {index} is beyond the trace, which has {entries} entries (0 to {last}; \
         {entries} is its end)",
        last = entries.saturating_sub(1)
    )]
    Beyond { index: u64, entries: u64 },
}

/// Replays entries before `index` and returns the pending state there.
pub fn pending_at(
    entries: impl IntoIterator<Item = Result<Entry, TraceError>>,
    config: Config,
    index: u64,
) -> Result<PendingState, DebugError> {
    let mut replay = Replay::new(config);
    let mut replayed = 0u64;
    let mut disk_writes = Vec::new();
    for entry in entries.into_iter().take(index as usize) {
        let entry = entry.map_err(DebugError::Trace)?;
        replay
            .step(&entry, &mut Discard)
            .map_err(DebugError::Model)?;
        // As the model has it (docs/design/model.md): a disk flush makes every earlier write durable.
        match &entry.op {
            Op::BlkWrite { offset, data } => disk_writes.push(PendingDiskWrite {
                entry: replayed,
                offset: *offset,
                len: data.len() as u64,
            }),
            Op::BlkFlush => disk_writes.clear(),
            _ => {}
        }
        replayed += 1;
    }
    if replayed < index {
        return Err(DebugError::Beyond {
            index,
            entries: replayed,
        });
    }
    let lines = replay
        .pending_lines()
        .iter()
        .map(|l| PendingLine {
            line: l.line,
            flush_mark: l.flush_mark(),
            units: l
                .units()
                .iter()
                .map(|u| PendingUnit {
                    addr: u.addr,
                    bytes: u.bytes().iter().map(|b| format!("{b:02x}")).collect(),
                    nt: u.nt,
                    entry: u.entry,
                    order: u.seq,
                    code: None,
                })
                .collect(),
        })
        .collect();
    Ok(PendingState {
        index,
        lines,
        disk_writes,
    })
}

impl PendingState {
    /// Names the code of each pending store from the trace (read again: `entries`) and
    /// its symbols.
    pub fn describe_code(
        &mut self,
        entries: impl IntoIterator<Item = Result<Entry, TraceError>>,
        symbols: &Symbols,
    ) -> Result<(), TraceError> {
        let mut wanted: Vec<&mut PendingUnit> =
            self.lines.iter_mut().flat_map(|l| &mut l.units).collect();
        wanted.sort_by_key(|u| u.entry);
        let mut wanted = wanted.into_iter().peekable();
        for (index, entry) in entries.into_iter().enumerate() {
            let Some(next) = wanted.peek() else {
                break;
            };
            if next.entry != index as u64 {
                continue;
            }
            let code = symbols.describe_meta(&entry?.meta);
            while let Some(unit) = wanted.next_if(|u| u.entry == index as u64) {
                unit.code = code.clone();
            }
        }
        Ok(())
    }

    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "pending before entry {}: {} line(s)",
            self.index,
            self.lines.len()
        );
        if !self.disk_writes.is_empty() {
            let _ = writeln!(t, "disk: {} write(s) not flushed:", self.disk_writes.len());
            for w in &self.disk_writes {
                let _ = writeln!(
                    t,
                    "  entry {:<8} blkwrite {:#x} ({} bytes)",
                    w.entry, w.offset, w.len
                );
            }
        }
        for l in &self.lines {
            let _ = writeln!(t, "line {:#x} (flush mark {}):", l.line, l.flush_mark);
            for (i, u) in l.units.iter().enumerate() {
                let flushed = if i < l.flush_mark { "flushed" } else { "" };
                let kind = if u.nt { "ntwrite" } else { "write" };
                let _ = write!(
                    t,
                    "  #{:<8} {kind:<7} {:#x} {:<16} entry {} {flushed}",
                    u.order, u.addr, u.bytes, u.entry
                );
                let _ = match &u.code {
                    Some(code) => writeln!(t, "  # {code}"),
                    None => writeln!(t),
                };
            }
        }
        t
    }
}

/// Discards what replay reports: only the pending state is wanted.
pub(crate) struct Discard;

impl Sink for Discard {
    fn persist(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn failure_point(&mut self, _: &FailureView<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// Every entry that stores to or flushes one of `lines` (line addresses or any byte of
/// them), with the fences and hypercalls between the first and the last of them, as text
/// lines `INDEX: ENTRY`, each followed by `# function+0xoff [module] < caller …` when
/// `symbols` are given.
pub fn entries_touching(
    entries: impl IntoIterator<Item = Result<Entry, TraceError>>,
    lines: &[u64],
    symbols: Option<&Symbols>,
) -> Result<Vec<String>, TraceError> {
    let show =
        |index: usize, entry: &Entry| match symbols.and_then(|s| s.describe_meta(&entry.meta)) {
            Some(code) => format!("{index}: {entry}  # {code}"),
            None => format!("{index}: {entry}"),
        };
    let lines: Vec<u64> = lines.iter().map(|l| l & !(LINE - 1)).collect();
    let touches = |start: u64, len: u64| {
        let first = start & !(LINE - 1);
        let last = (start + len.max(1) - 1) & !(LINE - 1);
        lines.iter().any(|l| (first..=last).contains(l))
    };
    let mut out = Vec::new();
    // fences and hypercalls seen since the last touching entry, shown once another follows
    let mut between = Vec::new();
    for (index, entry) in entries.into_iter().enumerate() {
        let entry = entry?;
        let relevant = match &entry.op {
            Op::Write { addr, data, .. } => touches(*addr, data.len() as u64),
            Op::Read { addr, size } => touches(*addr, *size),
            Op::Flush { addr, .. } => touches(*addr, 1),
            Op::Fence(_) | Op::Hypercall(_) => {
                if !out.is_empty() {
                    between.push(show(index, &entry));
                }
                continue;
            }
            _ => false,
        };
        if relevant {
            out.append(&mut between);
            out.push(show(index, &entry));
        }
    }
    Ok(out)
}
