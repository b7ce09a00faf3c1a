//! jbd2's journal as a consistency mechanism (docs/design/model.md, "Journals"): which
//! stores are journal writes, commit records and in-place writes of journaled blocks,
//! whether jbd2's ordering rules hold, and which dirty lines the journal makes irrelevant
//! to recovery, so that `reads` and `global-prefix` let them follow the cut.
//!
//! Recovery replays exactly the transactions whose commit block is durable, from the log
//! tail the journal superblock names. So, while the rules hold:
//! - a journal block that is not a commit record and not the superblock matters only once
//!   its transaction's commit is durable, and by rule 1 it is durable before that commit
//!   is even written: pending, it never changes what recovery replays;
//! - an in-place write of a block that a durable, replayable transaction holds is
//!   overwritten by replay whatever part of it persisted, unless mount reads it before
//!   replay (the superblock, group descriptors, journal inode: their checksums fail).
//!
//! The rules: (1) every other journal block is durable when a commit record is written;
//! (2) no block of a transaction is written in place before its commit is durable. A
//! violation is recorded with its witness, and from then on nothing is pruned.

use crate::pending::PmPending;
use crate::unit::LINE;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// A jbd2 journal block header's magic number (big-endian on media).
const MAGIC: u32 = 0xc03b_3998;
const DESCRIPTOR: u32 = 1;
const COMMIT: u32 = 2;
const REVOKE: u32 = 5;
/// Descriptor tag flags.
const SAME_UUID: u32 = 2;
const LAST_TAG: u32 = 8;

/// Where a jbd2 journal lies in PM, as the file system's on-media format gives it
/// (`persim_image::journal_layout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalLayout {
    /// The journal's blocks in PM, by logical block (block 0 is its superblock).
    pub extents: Vec<JournalExtent>,
    /// Bytes per journal block (the file system's block size).
    pub block_size: u64,
    /// PM offset of the file system's block 0 when it lies in PM too (an internal journal;
    /// `None` for an external journal on PM whose file system is on a disk).
    pub fs_start: Option<u64>,
    /// Bytes per descriptor tag (16 with checksums v3; 8, or 12 with 64-bit block
    /// numbers, without checksums); `None`: a format whose tags are not read, so in-place
    /// writes are never pruned.
    pub tag_bytes: Option<usize>,
    /// Bytes per revoke record: 8 with 64-bit block numbers, else 4.
    pub revoke_bytes: usize,
    /// The durable superblock's log tail: the first sequence recovery replays, and the
    /// tail block (0: the journal is empty, nothing is replayed).
    pub tail_sequence: u32,
    pub tail_block: u32,
    /// PM byte ranges that mount reads and checks before it replays the journal (ext4's
    /// superblock and group descriptors, the journal inode): a torn in-place write there
    /// fails the mount before replay could rewrite it, so their lines are never protected.
    pub read_before_replay: Vec<Range<u64>>,
}

/// A run of consecutive journal blocks in PM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalExtent {
    pub logical: u64,
    /// PM offset of its first block.
    pub start: u64,
    pub blocks: u64,
}

impl JournalLayout {
    /// The journal block holding `addr`, if the journal holds it.
    fn block_of(&self, addr: u64) -> Option<u64> {
        self.extents.iter().find_map(|e| {
            let end = e.start + e.blocks * self.block_size;
            (addr >= e.start && addr < end).then(|| e.logical + (addr - e.start) / self.block_size)
        })
    }

    fn fs_block_of(&self, addr: u64) -> Option<u64> {
        let fs_start = self.fs_start?;
        (addr >= fs_start).then(|| (addr - fs_start) / self.block_size)
    }
}

/// Which mechanism's rule a violation breaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogKind {
    #[default]
    Jbd2,
    Xfs,
    Pmemobj,
    Dpwc,
    Writecache,
    ZilPmem,
    Zfs,
}

/// A broken ordering rule of jbd2, the XFS log, DPWC's log, dm-writecache, ZIL-PMEM's log
/// or libpmemobj's logs, with the stores that break it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalViolation {
    #[serde(default)]
    pub log: LogKind,
    /// The trace entry that broke the rule.
    pub entry: u64,
    /// 1: a commit record written while other journal lines were not durable; 2: a block
    /// written in place before the commit of its transaction was durable.
    pub rule: u8,
    /// The commit's sequence number (XFS: the record's block in the log; libpmemobj: the
    /// lane; DPWC: the chunk, rule 2 the generation; dm-writecache: rule 1 the new count,
    /// rule 2 the block; ZIL-PMEM: the chunk; ZFS: 0).
    pub sequence: u32,
    /// jbd2 rule 1: the journal lines not durable; rule 2: the line written in place.
    /// XFS rule 1: the line written in place; rule 2: the record's lines not durable.
    /// libpmemobj: the line written in place, then the log's lines not durable.
    /// DPWC rule 1: the entry lines not durable; rule 2: the `used` lines not durable.
    /// dm-writecache rule 1: the block and entry lines not durable; rule 2: the line written.
    /// ZIL-PMEM: the body and next-slot lines not durable.
    /// ZFS: the label write's byte offset on the block device, then the pending blocks'.
    pub lines: Vec<u64>,
}

impl JournalViolation {
    pub fn describe(&self) -> String {
        let lines: Vec<String> = self
            .lines
            .iter()
            .take(4)
            .map(|l| format!("{l:#x}"))
            .collect();
        let more = match self.lines.len() {
            n if n > 4 => format!(" and {} more", n - 4),
            _ => String::new(),
        };
        match (self.log, self.rule) {
            (LogKind::Xfs, 1) => format!(
                "XFS log rule 1 broken at entry {}: line {}{more} written in place before the \
                 log record at block {} that logs it was durable",
                self.entry,
                lines.join(", "),
                self.sequence
            ),
            (LogKind::Xfs, _) => format!(
                "XFS log rule 2 broken at entry {}: a log record written while the record at \
                 block {}, 8 or more records back, was not durable (lines {}{more})",
                self.entry,
                self.sequence,
                lines.join(", ")
            ),
            (LogKind::Pmemobj, rule) => format!(
                "libpmemobj {} broken at entry {}: line {} written in place before lane {}'s \
                 {} that covers it was durable (log lines {})",
                match rule {
                    1 => "undo log rule 1",
                    _ => "redo log rule 2",
                },
                self.entry,
                lines.first().map_or("?", String::as_str),
                self.sequence,
                match rule {
                    1 => "undo log entry",
                    _ => "redo log with its checksum",
                },
                lines.get(1..).unwrap_or_default().join(", ") + &more
            ),
            (LogKind::Dpwc, 1) => format!(
                "DPWC log rule 1 broken at entry {}: chunk {}'s used moved over entry lines \
                 {}{more} that were not durable",
                self.entry,
                self.sequence,
                lines.join(", ")
            ),
            (LogKind::Dpwc, _) => format!(
                "DPWC log rule 2 broken at entry {}: generation {} opened while its used \
                 counters (lines {}{more}) were not durable",
                self.entry,
                self.sequence,
                lines.join(", ")
            ),
            (LogKind::Writecache, 1) => format!(
                "dm-writecache rule 1 broken at entry {}: the superblock's sequence count \
                 moved to {} while lines {}{more} of the blocks it commits were not durable",
                self.entry,
                self.sequence,
                lines.join(", ")
            ),
            (LogKind::Writecache, _) => format!(
                "dm-writecache rule 2 broken at entry {}: line {} of committed block {} \
                 written in place",
                self.entry,
                lines.join(", "),
                self.sequence
            ),
            (LogKind::ZilPmem, _) => format!(
                "ZIL-PMEM log rule broken at entry {}: a header in chunk {} stored while lines \
                 {}{more} of its body or of the end mark after it were not durable",
                self.entry,
                self.sequence,
                lines.join(", ")
            ),
            (LogKind::Zfs, _) => format!(
                "ZFS rule broken at entry {}: a label (uberblock or configuration) written at \
                 block-device byte {} while blocks at {}{more} were not durable",
                self.entry,
                lines.first().map_or("?", String::as_str),
                lines.get(1..).unwrap_or_default().join(", ")
            ),
            (LogKind::Jbd2, 1) => format!(
                "jbd2 rule 1 broken at entry {}: commit record of transaction {} written while \
                 journal lines {}{more} were not durable",
                self.entry,
                self.sequence,
                lines.join(", ")
            ),
            (LogKind::Jbd2, _) => format!(
                "jbd2 rule 2 broken at entry {}: line {}{more} written in place before the \
                 commit of transaction {} was durable",
                self.entry,
                lines.join(", "),
                self.sequence
            ),
        }
    }
}

#[derive(Debug, Default)]
struct Transaction {
    /// File-system blocks its descriptors list.
    blocks: Vec<u64>,
    /// The line of its commit record's header, once written.
    commit_line: Option<u64>,
    durable: bool,
}

/// Follows one journal through a replay.
#[derive(Debug)]
pub struct Journal {
    layout: JournalLayout,
    /// The journal blocks written in the trace that begin with a header: their bytes.
    headed: FxHashMap<u64, Vec<u8>>,
    transactions: FxHashMap<u32, Transaction>,
    /// Blocks of transactions whose descriptor is written and commit not yet durable.
    committing: FxHashMap<u64, u32>,
    /// The durable log tail (sequence, block), and one written but not yet durable.
    tail: (u32, u32),
    written_tail: Option<(u32, u32)>,
    /// The superblock lines written since the tail was last durable.
    tail_lines: Vec<u64>,
    /// Blocks that written revoke records name: replay may skip them, so they are never
    /// pruned in place.
    revoked: FxHashSet<u64>,
    /// A revoke block could not be read: no block is pruned in place.
    revoke_unread: bool,
    violations: Vec<JournalViolation>,
    /// A rule was broken: nothing is pruned any more.
    broken: bool,
    /// Blocks that durable, replayable transactions hold.
    covered: FxHashSet<u64>,
}

impl Journal {
    pub fn new(layout: JournalLayout) -> Journal {
        let tail = (layout.tail_sequence, layout.tail_block);
        Journal {
            layout,
            headed: FxHashMap::default(),
            transactions: FxHashMap::default(),
            committing: FxHashMap::default(),
            tail,
            written_tail: None,
            tail_lines: Vec::new(),
            revoked: FxHashSet::default(),
            revoke_unread: false,
            violations: Vec::new(),
            broken: false,
            covered: FxHashSet::default(),
        }
    }

    /// Whether the rules have held so far (then lines may be pruned).
    pub fn holds_so_far(&self) -> bool {
        !self.broken
    }

    /// Violations recorded since the last call.
    pub fn take_violations(&mut self) -> Vec<JournalViolation> {
        std::mem::take(&mut self.violations)
    }

    fn violated(&mut self, violation: JournalViolation) {
        self.broken = true;
        self.violations.push(violation);
    }

    /// A store of `data` at `addr` by entry `entry`, before the model takes it.
    pub fn store(&mut self, addr: u64, data: &[u8], entry: u64, pending: &PmPending) {
        let layout = &self.layout;
        let Some(block) = layout.block_of(addr) else {
            self.in_place(addr, entry);
            return;
        };
        let offset = addr % layout.block_size;
        if block == 0 {
            self.superblock(addr, offset, data);
            return;
        }
        if offset == 0 && data.len() >= 4 && be32(data, 0) == MAGIC {
            self.headed
                .insert(block, vec![0; layout.block_size as usize]);
        }
        let Some(bytes) = self.headed.get_mut(&block) else {
            return;
        };
        let at = offset as usize;
        let end = (at + data.len()).min(bytes.len());
        bytes[at..end].copy_from_slice(&data[..end - at]);
        // the store that completes the 12-byte header (magic, type, sequence)
        if at < 12 && end >= 12 && be32(bytes, 4) == COMMIT {
            let sequence = be32(bytes, 8);
            self.commit(block, addr & !(LINE - 1), sequence, entry, pending);
        }
    }

    fn superblock(&mut self, addr: u64, offset: u64, data: &[u8]) {
        let line = addr & !(LINE - 1);
        if !self.tail_lines.contains(&line) {
            self.tail_lines.push(line);
        }
        // s_sequence and s_start, big-endian words at 0x18 and 0x1c
        let mut tail = self.written_tail.unwrap_or(self.tail);
        for (field, value) in [(0x18u64, &mut tail.0), (0x1c, &mut tail.1)] {
            if offset <= field && field + 4 <= offset + data.len() as u64 {
                *value = be32(data, (field - offset) as usize);
            }
        }
        self.written_tail = Some(tail);
    }

    fn commit(
        &mut self,
        block: u64,
        header_line: u64,
        sequence: u32,
        entry: u64,
        pending: &PmPending,
    ) {
        let layout = &self.layout;
        let not_durable: Vec<u64> = pending
            .dirty_lines()
            .iter()
            .map(|l| l.line)
            .filter(|&l| layout.block_of(l).is_some_and(|b| b != 0 && b != block))
            .collect();
        if !not_durable.is_empty() {
            self.violated(JournalViolation {
                log: LogKind::Jbd2,
                entry,
                rule: 1,
                sequence,
                lines: not_durable,
            });
        }
        let blocks = self.descriptor_blocks(sequence);
        for &b in &blocks {
            self.committing.insert(b, sequence);
        }
        let tx = self.transactions.entry(sequence).or_default();
        tx.blocks = blocks;
        tx.commit_line = Some(header_line);
    }

    /// The file-system blocks that the written descriptors of `sequence` list (none when
    /// the tag format is not read).
    fn descriptor_blocks(&mut self, sequence: u32) -> Vec<u64> {
        let Some(tag_bytes) = self.layout.tag_bytes else {
            return Vec::new();
        };
        let mut blocks = Vec::new();
        for bytes in self.headed.values() {
            if be32(bytes, 8) != sequence {
                continue;
            }
            match be32(bytes, 4) {
                DESCRIPTOR => blocks.extend(tags(bytes, tag_bytes)),
                REVOKE => match revoked(bytes, self.layout.revoke_bytes) {
                    Some(revoked) => self.revoked.extend(revoked),
                    None => self.revoke_unread = true,
                },
                _ => {}
            }
        }
        blocks
    }

    fn in_place(&mut self, addr: u64, entry: u64) {
        let Some(block) = self.layout.fs_block_of(addr) else {
            return;
        };
        if let Some(&sequence) = self.committing.get(&block) {
            self.violated(JournalViolation {
                log: LogKind::Jbd2,
                entry,
                rule: 2,
                sequence,
                lines: vec![addr & !(LINE - 1)],
            });
        }
    }

    /// After a fence: commits and superblock writes whose lines are no longer pending are
    /// durable.
    pub fn fenced(&mut self, pending: &PmPending) {
        let mut changed = false;
        if self.written_tail.is_some() && !self.tail_lines.iter().any(|&l| pending.is_dirty(l)) {
            self.tail = self.written_tail.take().unwrap_or(self.tail);
            self.tail_lines.clear();
            changed = true;
        }
        for tx in self.transactions.values_mut() {
            if !tx.durable && tx.commit_line.is_some_and(|l| !pending.is_dirty(l)) {
                tx.durable = true;
                changed = true;
                for b in &tx.blocks {
                    self.committing.remove(b);
                }
            }
        }
        if changed {
            self.cover();
        }
    }

    /// The blocks that durable transactions at or after the durable tail hold.
    fn cover(&mut self) {
        let (tail_sequence, tail_block) = self.tail;
        self.covered = match tail_block != 0 && !self.revoke_unread {
            true => self
                .transactions
                .iter()
                .filter(|(&seq, tx)| tx.durable && seq.wrapping_sub(tail_sequence) < 1 << 31)
                .flat_map(|(_, tx)| tx.blocks.iter().copied())
                .filter(|block| !self.revoked.contains(block))
                .collect(),
            false => FxHashSet::default(),
        };
    }

    /// Whether `line`, dirty at a failure point, cannot change what recovery leaves while
    /// the rules hold: a journal line other than the superblock's and commit headers', or
    /// an in-place line of a block that a durable transaction will replay.
    pub fn protects(&self, line: u64) -> bool {
        let layout = &self.layout;
        let Some(block) = layout.block_of(line) else {
            let read_first =
                (layout.read_before_replay.iter()).any(|r| r.start < line + LINE && line < r.end);
            return !read_first
                && layout
                    .fs_block_of(line)
                    .is_some_and(|b| self.covered.contains(&b));
        };
        let header = line.is_multiple_of(layout.block_size);
        let commit = header
            && self
                .headed
                .get(&block)
                .is_some_and(|bytes| be32(bytes, 4) == COMMIT);
        block != 0 && !commit
    }
}

/// The file-system block numbers of a descriptor block's tags.
fn tags(bytes: &[u8], tag_bytes: usize) -> Vec<u64> {
    let mut blocks = Vec::new();
    let mut at = 12;
    while at + tag_bytes <= bytes.len() {
        let low = u64::from(be32(bytes, at));
        let (flags, high) = match tag_bytes {
            16 => (be32(bytes, at + 4), u64::from(be32(bytes, at + 8))),
            12 => (
                u32::from(be16(bytes, at + 6)),
                u64::from(be32(bytes, at + 8)),
            ),
            _ => (u32::from(be16(bytes, at + 6)), 0),
        };
        blocks.push(high << 32 | low);
        at += tag_bytes;
        if flags & SAME_UUID == 0 {
            at += 16;
        }
        if flags & LAST_TAG != 0 {
            break;
        }
    }
    blocks
}

/// The file-system block numbers a revoke block names (a 16-byte header whose last word
/// counts the bytes used, then `record_bytes` per block), or `None` when that count does
/// not fit the block.
fn revoked(bytes: &[u8], record_bytes: usize) -> Option<Vec<u64>> {
    let used = be32(bytes, 12) as usize;
    if used < 16 || used > bytes.len() || !(used - 16).is_multiple_of(record_bytes) {
        return None;
    }
    let record = |at: usize| match record_bytes {
        8 => u64::from(be32(bytes, at)) << 32 | u64::from(be32(bytes, at + 4)),
        _ => u64::from(be32(bytes, at)),
    };
    Some((16..used).step_by(record_bytes).map(record).collect())
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn be16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(bytes[at..at + 2].try_into().expect("two bytes"))
}
