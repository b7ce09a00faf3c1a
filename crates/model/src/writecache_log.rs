//! dm-writecache's metadata on PM (Linux's `drivers/md/dm-writecache.c`, PM mode) as a
//! consistency mechanism (docs/design/model.md, "dm-writecache"): which stores write a
//! cache block, its entry (origin sector and sequence count) or the superblock's sequence
//! count that commits every entry below it, whether the commit rules hold, and which dirty
//! lines follow the cut: data of blocks uncommitted in every crash image.
//!
//! Recovery (`writecache_resume`) takes a block whose entry's sequence count is below the
//! superblock's as committed and frees every other one, its data unread. So a data line of
//! a block whose entry holds, in every crash image, a count at or above every count the
//! superblock can hold changes nothing recovery reads.
//!
//! The rules: (1) when the superblock's count moves, the blocks and entries it commits
//! are durable; (2) no committed block's data is written in place. A violation is
//! recorded with its witness, and from then on nothing is pruned.

use crate::jbd2::{JournalViolation, LogKind};
use crate::pending::PmPending;
use crate::rule_log::RuleLog;
use crate::unit::{LINE, WORD};
use rustc_hash::FxHashSet;

/// The superblock's size before the entries, an entry's size, and where in each the
/// sequence count lies.
const SUPERBLOCK: u64 = 64;
const SB_SEQ: u64 = 24;
const ENTRY: u64 = 16;
const ENTRY_SEQ: u64 = 8;

/// Where dm-writecache's cache lies in PM, as its superblock gives it
/// (`persim_image::writecache_layout`), and the counts of the initial image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritecacheLayout {
    /// PM offset of the superblock (the cache's first byte).
    pub start: u64,
    pub block_size: u64,
    /// Offset from `start` of block 0's data (after the entries, at a block boundary).
    pub data: u64,
    /// The superblock's sequence count and each block's entry's.
    pub seq: u64,
    pub entries: Vec<u64>,
}

impl WritecacheLayout {
    fn blocks(&self) -> u64 {
        self.entries.len() as u64
    }

    fn entry_line(&self, block: u64) -> u64 {
        (self.start + SUPERBLOCK + block * ENTRY) & !(LINE - 1)
    }

    /// The block whose sequence count the aligned word at `addr` is.
    fn entry_seq(&self, addr: u64) -> Option<u64> {
        let at = addr.checked_sub(self.start + SUPERBLOCK)?;
        let block = at / ENTRY;
        (at % ENTRY == ENTRY_SEQ && block < self.blocks()).then_some(block)
    }

    fn block_of(&self, addr: u64) -> Option<u64> {
        let block = addr.checked_sub(self.start + self.data)? / self.block_size;
        (block < self.blocks()).then_some(block)
    }

    fn block_lines(&self, block: u64) -> impl Iterator<Item = u64> {
        let at = self.start + self.data + block * self.block_size;
        (at..at + self.block_size).step_by(LINE as usize)
    }
}

/// A count as a crash image can hold it: the last one stored, and the smallest or largest
/// of the durable one and those stored since its line was last clean.
#[derive(Clone, Copy, Debug)]
struct Count {
    latest: u64,
    bound: u64,
}

/// Follows one dm-writecache cache through a replay.
#[derive(Debug)]
pub struct WritecacheLog {
    layout: WritecacheLayout,
    /// The superblock's count (bound: the largest a crash image can hold).
    seq: Count,
    /// Per block, its entry's count (bound: the smallest a crash image can hold).
    entries: Vec<Count>,
    /// Blocks whose entry is not committed by the last superblock count stored.
    uncommitted: FxHashSet<u64>,
    /// Blocks whose entry's line, and whether the superblock's line, may be dirty.
    unsettled: FxHashSet<u64>,
    sb_unsettled: bool,
    rules: RuleLog,
}

impl WritecacheLog {
    pub fn new(layout: WritecacheLayout) -> WritecacheLog {
        let seq = Count {
            latest: layout.seq,
            bound: layout.seq,
        };
        let entries: Vec<Count> = layout
            .entries
            .iter()
            .map(|&c| Count {
                latest: c,
                bound: c,
            })
            .collect();
        let uncommitted = (0..layout.blocks())
            .filter(|&b| entries[b as usize].latest >= seq.latest)
            .collect();
        WritecacheLog {
            layout,
            seq,
            entries,
            uncommitted,
            unsettled: FxHashSet::default(),
            sb_unsettled: false,
            rules: RuleLog::new(LogKind::Writecache),
        }
    }

    pub fn holds_so_far(&self) -> bool {
        self.rules.holds()
    }

    pub fn take_violations(&mut self) -> Vec<JournalViolation> {
        self.rules.take()
    }

    /// A store of `data` at `addr` by entry `entry`, before the model takes it.
    pub fn store(&mut self, addr: u64, data: &[u8], entry: u64, pending: &PmPending) {
        if let Some(block) = self.layout.block_of(addr) {
            let committed = self.entries[block as usize].latest < self.seq.latest;
            if committed && self.rules.holds() {
                let line = addr & !(LINE - 1);
                self.rules.broke(entry, 2, block, vec![line]);
            }
            return;
        }
        let end = addr + data.len() as u64;
        let mut word = addr.next_multiple_of(WORD);
        while word + WORD <= end {
            let at = (word - addr) as usize;
            let value = u64::from_le_bytes(data[at..at + 8].try_into().expect("eight bytes"));
            if word == self.layout.start + SB_SEQ {
                self.commit(value, entry, pending);
            } else if let Some(block) = self.layout.entry_seq(word) {
                self.entry_count(block, value);
            }
            word += WORD;
        }
    }

    fn entry_count(&mut self, block: u64, value: u64) {
        let count = &mut self.entries[block as usize];
        count.latest = value;
        count.bound = count.bound.min(value);
        if value >= self.seq.latest {
            self.uncommitted.insert(block);
        }
        self.unsettled.insert(block);
    }

    /// The superblock's count moves to `value`: the blocks it commits must be durable.
    fn commit(&mut self, value: u64, entry: u64, pending: &PmPending) {
        let committed: Vec<u64> = self
            .uncommitted
            .iter()
            .copied()
            .filter(|&b| self.entries[b as usize].latest < value)
            .collect();
        let mut dirty = Vec::new();
        for &b in &committed {
            self.uncommitted.remove(&b);
            let entry_line = self.layout.entry_line(b);
            dirty.extend(
                std::iter::once(entry_line)
                    .chain(self.layout.block_lines(b))
                    .filter(|&l| pending.is_dirty(l)),
            );
        }
        if !dirty.is_empty() && self.rules.holds() {
            dirty.sort_unstable();
            dirty.dedup();
            self.rules.broke(entry, 1, value, dirty);
        }
        self.seq.latest = value;
        self.seq.bound = self.seq.bound.max(value);
        self.sb_unsettled = true;
    }

    /// After a fence: a count whose line is clean holds its last value in every image.
    pub fn fenced(&mut self, pending: &PmPending) {
        if self.sb_unsettled && !pending.is_dirty(self.layout.start) {
            self.seq.bound = self.seq.latest;
            self.sb_unsettled = false;
        }
        let layout = &self.layout;
        let entries = &mut self.entries;
        self.unsettled.retain(|&b| {
            let dirty = pending.is_dirty(layout.entry_line(b));
            if !dirty {
                let count = &mut entries[b as usize];
                count.bound = count.latest;
            }
            dirty
        });
    }

    /// Whether `line`, dirty at a failure point, holds data of a block that no crash image
    /// commits: recovery frees it unread.
    pub fn protects(&self, line: u64) -> bool {
        self.layout
            .block_of(line)
            .is_some_and(|b| self.entries[b as usize].bound >= self.seq.bound)
    }
}
