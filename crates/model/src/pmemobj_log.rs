//! libpmemobj's transaction logs as a consistency mechanism (docs/design/model.md,
//! "libpmemobj logs"): which stores write a lane's ulogs (the undo log of `TX_ADD`
//! snapshots, the redo logs of allocator metadata and transactions), which in-place stores
//! their entries cover, and whether the logs' ordering rules hold.
//!
//! A pool's lanes (PMDK 1.12's on-media format) each hold three ulogs: an internal redo
//! log (192 bytes of entries), an external redo log (640) and an undo log (2,048). A ulog
//! is a 64-byte header (checksum, next, capacity, generation number, flags) and entries:
//! a word of pool offset with the operation in its top three bits, then a value (16-byte
//! entries: set, and, or) or a checksum, a size and that many bytes (buffer entries,
//! padded to a cache line). Recovery rolls back the undo entries whose checksums match
//! the log's generation, and applies a redo log whose checksum matches.
//!
//! The rules: (1) an undo entry is durable before the range it snapshots is written in
//! place; (2) a redo log's entries and its checksum are durable before any range they
//! name is written in place. A violation is recorded with its witness (the in-place line,
//! then the log lines still pending), once per log generation.
//!
//! While they hold, a dirty line whose pending units all lie in ranges that recovery
//! rewrites from a durable log (an undo snapshot rolled back, a redo set or buffer
//! applied) follows the cut: whatever part of it persisted, recovery writes over it. The
//! log's header line (the undo generation that commits a transaction, the redo checksum)
//! stays explored: a transaction is committed or not. Trusted: PMDK's own checksums.

use crate::jbd2::{JournalViolation, LogKind};
use crate::pending::{LineState, PmPending};
use crate::unit::LINE;
use rustc_hash::FxHashMap;

/// Bytes per lane, and its ulogs: offset in the lane, bytes of entries, which log.
const LANE: u64 = 3072;
const ULOGS: [(u64, u64, Kind); 3] = [
    (0, 192, Kind::Redo),
    (256, 640, Kind::Redo),
    (960, 2048, Kind::Undo),
];
const HEADER: u64 = 64;
/// Header words: the checksum (a redo log is live while it is not zero) and the
/// generation number (a new one invalidates every undo entry).
const CHECKSUM: u64 = 0;
const GEN_NUM: u64 = 24;
const OPERATION: u64 = 0b111 << 61;
const SET: u64 = 0;
const AND: u64 = 0b001 << 61;
const OR: u64 = 0b010 << 61;
const BUF_SET: u64 = 0b101 << 61;
const BUF_CPY: u64 = 0b110 << 61;
/// A buffer entry's header: offset, checksum, size.
const BUF_HEADER: u64 = 24;
const VALUE_ENTRY: u64 = 16;

/// Where a libpmemobj pool's lanes lie in PM, as its pool descriptor gives them
/// (`persim_image::pmemobj_layout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmemobjLayout {
    /// PM offset of the pool's first byte (its "PMEMOBJ" header): entries name offsets
    /// from it.
    pub pool: u64,
    /// PM offset of lane 0, and how many lanes follow it.
    pub lanes: u64,
    pub nlanes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Redo,
    Undo,
}

/// A ulog entry: its operation, the PM range it names, and its own PM range in the log.
#[derive(Debug)]
struct Entry {
    op: u64,
    target: (u64, u64),
    at: (u64, u64),
}

impl Entry {
    fn names(&self, start: u64, end: u64) -> bool {
        start < self.target.1 && end > self.target.0
    }

    /// Whether recovery writes all of `[start, end)` whatever was there: a set or a
    /// buffer (and/or depend on what they change).
    fn rewrites(&self, start: u64, end: u64) -> bool {
        self.op != AND && self.op != OR && start >= self.target.0 && end <= self.target.1
    }
}

/// One lane's ulog: its bytes as written since its entries were last invalidated.
#[derive(Debug)]
struct Ulog {
    kind: Kind,
    lane: u64,
    start: u64,
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    /// A rule broken in this generation was already reported.
    flagged: bool,
}

impl Ulog {
    fn reset(&mut self) {
        self.bytes[HEADER as usize..].fill(0);
        self.entries.clear();
        self.flagged = false;
    }

    /// Reads the entries from the first, up to one not (yet) whole.
    fn parse(&mut self, pool: u64) {
        self.entries.clear();
        let data = &self.bytes[HEADER as usize..];
        let mut at = 0u64;
        while at + VALUE_ENTRY <= data.len() as u64 {
            let word = le64(data, at);
            let target = pool.saturating_add(word & !OPERATION);
            let (size, len) = match word & OPERATION {
                _ if word == 0 => break,
                SET | AND | OR => (8, VALUE_ENTRY),
                BUF_SET | BUF_CPY if at + BUF_HEADER <= data.len() as u64 => {
                    let size = le64(data, at + 16);
                    (
                        size,
                        (BUF_HEADER.saturating_add(size)).div_ceil(LINE) * LINE,
                    )
                }
                _ => break,
            };
            if size == 0 || at.saturating_add(len) > data.len() as u64 {
                break;
            }
            let first = self.start + HEADER + at;
            self.entries.push(Entry {
                op: word & OPERATION,
                target: (target, target.saturating_add(size)),
                at: (first, first + len),
            });
            at += len;
        }
    }

    /// The log lines not yet durable that an in-place store to `[addr, end)` needs durable.
    fn pending_for(&self, addr: u64, end: u64, pending: &PmPending) -> Option<Vec<u64>> {
        let lines: Vec<u64> = match self.kind {
            Kind::Undo => self
                .entries
                .iter()
                .filter(|e| e.names(addr, end))
                .flat_map(|e| lines(e.at))
                .filter(|&l| pending.is_dirty(l))
                .collect(),
            Kind::Redo => {
                self.entries.iter().find(|e| e.names(addr, end))?;
                let last = self.entries.last().map_or(self.start, |e| e.at.1);
                let mut lines: Vec<u64> = lines((self.start, last))
                    .filter(|&l| pending.is_dirty(l))
                    .collect();
                if le64(&self.bytes, CHECKSUM) == 0 && lines.is_empty() {
                    lines.push(self.start);
                }
                lines
            }
        };
        (!lines.is_empty()).then_some(lines)
    }

    /// Whether recovery rewrites all of `[start, end)` from this log whatever the cut:
    /// its header durable, and an undo entry durable with every entry before it (recovery
    /// rolls back up to the first invalid one), or a redo log whose checksum is written
    /// and whose lines are all durable.
    fn restores(&self, start: u64, end: u64, pending: &PmPending) -> bool {
        let Some(first) = self.entries.iter().position(|e| e.rewrites(start, end)) else {
            return false;
        };
        let durable = |range| lines(range).all(|l| !pending.is_dirty(l));
        durable((self.start, self.start + HEADER))
            && match self.kind {
                Kind::Undo => self.entries[..=first].iter().all(|e| durable(e.at)),
                Kind::Redo => {
                    let last = self.entries.last().map_or(self.start, |e| e.at.1);
                    le64(&self.bytes, CHECKSUM) != 0 && durable((self.start, last))
                }
            }
    }
}

fn lines((start, end): (u64, u64)) -> impl Iterator<Item = u64> {
    (start & !(LINE - 1)..end).step_by(LINE as usize)
}

/// Follows one pool's lane logs through a replay.
#[derive(Debug)]
pub struct PmemobjLogs {
    layout: PmemobjLayout,
    /// The ulogs written so far, by PM offset of their header.
    ulogs: FxHashMap<u64, Ulog>,
    violations: Vec<JournalViolation>,
    broken: bool,
}

impl PmemobjLogs {
    pub fn new(layout: PmemobjLayout) -> PmemobjLogs {
        PmemobjLogs {
            layout,
            ulogs: FxHashMap::default(),
            violations: Vec::new(),
            broken: false,
        }
    }

    pub fn holds_so_far(&self) -> bool {
        !self.broken
    }

    pub fn take_violations(&mut self) -> Vec<JournalViolation> {
        std::mem::take(&mut self.violations)
    }

    /// The ulog holding `addr`: its header's PM offset, kind, lane and length.
    fn ulog_of(&self, addr: u64) -> Option<(u64, Kind, u64, u64)> {
        let lanes = &self.layout;
        let within = addr.checked_sub(lanes.lanes)?;
        let lane = within / LANE;
        if lane >= lanes.nlanes {
            return None;
        }
        let at = within % LANE;
        let &(offset, capacity, kind) = ULOGS.iter().rev().find(|(offset, _, _)| at >= *offset)?;
        let len = HEADER + capacity;
        let start = lanes.lanes + lane * LANE + offset;
        (addr < start + len).then_some((start, kind, lane, len))
    }

    /// A store of `data` at `addr` by entry `entry`, before the model takes it.
    pub fn store(&mut self, addr: u64, data: &[u8], entry: u64, pending: &PmPending) {
        let mut at = addr;
        let mut rest = data;
        while !rest.is_empty() {
            let Some((start, kind, lane, len)) = self.ulog_of(at) else {
                // a store is either in the lanes or not: the lanes are one range
                self.in_place(at, rest.len() as u64, entry, pending);
                return;
            };
            let take = rest.len().min((start + len - at) as usize);
            self.log_store(start, kind, lane, len, at, &rest[..take]);
            at += take as u64;
            rest = &rest[take..];
        }
    }

    fn log_store(&mut self, start: u64, kind: Kind, lane: u64, len: u64, at: u64, data: &[u8]) {
        let pool = self.layout.pool;
        let ulog = self.ulogs.entry(start).or_insert_with(|| Ulog {
            kind,
            lane,
            start,
            bytes: vec![0; len as usize],
            entries: Vec::new(),
            flagged: false,
        });
        let from = (at - start) as usize;
        let touches = |word: u64| from < word as usize + 8 && from + data.len() > word as usize;
        if kind == Kind::Undo && touches(GEN_NUM) {
            ulog.reset();
        }
        ulog.bytes[from..from + data.len()].copy_from_slice(data);
        // a redo log's checksum cleared: it was applied, its entries are dead
        if kind == Kind::Redo && touches(CHECKSUM) && le64(&ulog.bytes, CHECKSUM) == 0 {
            ulog.reset();
        }
        ulog.parse(pool);
    }

    fn in_place(&mut self, addr: u64, len: u64, entry: u64, pending: &PmPending) {
        let end = addr.saturating_add(len);
        let mut found = Vec::new();
        for ulog in self.ulogs.values_mut().filter(|u| !u.flagged) {
            if let Some(log_lines) = ulog.pending_for(addr, end, pending) {
                ulog.flagged = true;
                let rule = match ulog.kind {
                    Kind::Undo => 1,
                    Kind::Redo => 2,
                };
                let mut lines = vec![addr & !(LINE - 1)];
                lines.extend(log_lines);
                found.push(JournalViolation {
                    log: LogKind::Pmemobj,
                    entry,
                    rule,
                    sequence: ulog.lane as u32,
                    lines,
                });
            }
        }
        found.sort_by_key(|v| (v.sequence, v.rule));
        self.broken |= !found.is_empty();
        self.violations.extend(found);
    }

    /// Whether every pending unit of `line` lies in a range that recovery rewrites from a
    /// durable log whatever the cut: the line may follow it.
    pub fn protects(&self, line: &LineState, pending: &PmPending) -> bool {
        line.units().iter().all(|u| {
            let end = u.addr + u.bytes().len() as u64;
            self.ulogs
                .values()
                .any(|log| log.restores(u.addr, end, pending))
        })
    }
}

fn le64(bytes: &[u8], at: u64) -> u64 {
    let at = at as usize;
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}
