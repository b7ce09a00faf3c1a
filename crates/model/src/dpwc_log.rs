//! DPWC's log (targets/dpwc, docs/design/dpwc.md) as a consistency mechanism
//! (docs/design/model.md, "DPWC log"): which stores are entries, which are the chunks'
//! `used` counters that commit them and which open a generation, whether the log's
//! ordering rules hold, and which dirty lines follow the cut: entry lines past every
//! value their chunk's `used` can hold in a crash image.
//!
//! Recovery walks each chunk of a live generation only up to its `used` (the bytes of
//! complete entries), so a line past it is never read: whatever part of it persisted, the
//! recovered state is the same.
//!
//! The rules: (1) an entry's lines are durable before the `used` store that covers them;
//! (2) a generation's `used` counters are durable (reset) before its id is stored. A
//! violation is recorded with its witness, and from then on nothing is pruned.

use crate::jbd2::{JournalViolation, LogKind};
use crate::pending::PmPending;
use crate::rule_log::RuleLog;
use crate::unit::LINE;
use rustc_hash::FxHashSet;

/// Where a DPWC log lies in PM, as its superblock gives it (`persim_image::dpwc_layout`),
/// and what its counters held in the initial image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpwcLayout {
    /// PM offset of the pmem device's first byte (the superblock).
    pub start: u64,
    pub chunk_size: u64,
    pub chunks_per_gen: u64,
    pub generations: u64,
    /// Offsets from `start` of the generation table and of the first chunk.
    pub table: u64,
    pub data: u64,
    /// Per chunk (generation-major), its `used` in the initial image, at most a chunk.
    pub used: Vec<u64>,
}

impl DpwcLayout {
    fn chunks(&self) -> u64 {
        self.generations * self.chunks_per_gen
    }

    /// The line of generation `g`'s word.
    fn gen_line(&self, g: u64) -> u64 {
        self.start + self.table + g * LINE * (1 + self.chunks_per_gen)
    }

    /// The line of chunk `c`'s `used` (`c` generation-major).
    fn used_line(&self, c: u64) -> u64 {
        let (g, within) = (c / self.chunks_per_gen, c % self.chunks_per_gen);
        self.gen_line(g) + LINE * (1 + within)
    }

    /// What a store at `addr` writes in the table: a generation's word or a chunk's `used`.
    fn table_word(&self, addr: u64) -> Option<Word> {
        let table = self.start + self.table;
        let lines = self.generations * (1 + self.chunks_per_gen);
        if addr < table || addr >= table + lines * LINE || !addr.is_multiple_of(LINE) {
            return None;
        }
        let index = (addr - table) / LINE;
        let (g, within) = (
            index / (1 + self.chunks_per_gen),
            index % (1 + self.chunks_per_gen),
        );
        Some(match within {
            0 => Word::Generation(g),
            c => Word::Used(g * self.chunks_per_gen + c - 1),
        })
    }

    /// The chunk and offset in it of a PM address in the data region.
    fn in_chunk(&self, addr: u64) -> Option<(u64, u64)> {
        let at = addr.checked_sub(self.start + self.data)?;
        let chunk = at / self.chunk_size;
        (chunk < self.chunks()).then_some((chunk, at % self.chunk_size))
    }

    fn chunk_lines(&self, chunk: u64, from: u64, to: u64) -> impl Iterator<Item = u64> {
        let base = self.start + self.data + chunk * self.chunk_size;
        (from / LINE * LINE..to.min(self.chunk_size))
            .step_by(LINE as usize)
            .map(move |o| base + o)
    }
}

enum Word {
    Generation(u64),
    Used(u64),
}

/// Follows one DPWC log through a replay.
#[derive(Debug)]
pub struct DpwcLog {
    layout: DpwcLayout,
    /// Per chunk: the last `used` stored, and the largest value a crash image can hold
    /// (the durable one and any stored since its line was last clean).
    latest: Vec<u64>,
    floor: Vec<u64>,
    /// Chunks whose `used` line may still be dirty.
    unsettled: FxHashSet<u64>,
    rules: RuleLog,
}

impl DpwcLog {
    pub fn new(layout: DpwcLayout) -> DpwcLog {
        let chunks = layout.chunks() as usize;
        let mut used = layout.used.clone();
        used.resize(chunks, layout.chunk_size);
        DpwcLog {
            latest: used.clone(),
            floor: used,
            unsettled: FxHashSet::default(),
            layout,
            rules: RuleLog::new(LogKind::Dpwc),
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
        if data.len() < 4 {
            return;
        }
        match self.layout.table_word(addr) {
            Some(Word::Used(chunk)) => {
                let value = u64::from(u32::from_le_bytes(data[..4].try_into().expect("four")))
                    .min(self.layout.chunk_size);
                let i = chunk as usize;
                let dirty: Vec<u64> = self
                    .layout
                    .chunk_lines(chunk, self.latest[i], value)
                    .filter(|&l| pending.is_dirty(l))
                    .collect();
                if !dirty.is_empty() && self.rules.holds() {
                    self.rules.broke(entry, 1, chunk, dirty);
                }
                self.latest[i] = value;
                self.floor[i] = self.floor[i].max(value);
                self.unsettled.insert(chunk);
            }
            Some(Word::Generation(g)) if data.iter().take(6).any(|&b| b != 0) => {
                let first = g * self.layout.chunks_per_gen;
                let dirty: Vec<u64> = (first..first + self.layout.chunks_per_gen)
                    .map(|c| self.layout.used_line(c))
                    .filter(|&l| pending.is_dirty(l))
                    .collect();
                if !dirty.is_empty() && self.rules.holds() {
                    self.rules.broke(entry, 2, g, dirty);
                }
            }
            _ => {}
        }
    }

    /// After a fence: a chunk whose `used` line is clean holds its last value in every
    /// crash image.
    pub fn fenced(&mut self, pending: &PmPending) {
        let layout = &self.layout;
        let (latest, floor) = (&self.latest, &mut self.floor);
        self.unsettled.retain(|&c| {
            let dirty = pending.is_dirty(layout.used_line(c));
            if !dirty {
                floor[c as usize] = latest[c as usize];
            }
            dirty
        });
    }

    /// Whether `line`, dirty at a failure point, lies in a chunk past every `used` a crash
    /// image can hold: recovery never reads it.
    pub fn protects(&self, line: u64) -> bool {
        self.layout
            .in_chunk(line)
            .is_some_and(|(chunk, offset)| offset >= self.floor[chunk as usize])
    }
}
