//! ZIL-PMEM's log in OpenZFS (targets/zil-pmem/openzfs, format 2; docs/design/model.md,
//! "ZIL-PMEM log") as a consistency mechanism: which stores are entry headers, which free a
//! chunk, whether the write protocol's rule holds, and which dirty lines follow the cut:
//! those past the last header slot a chunk's walk can reach in a crash image.
//!
//! Recovery walks each chunk from its first header slot, entry by entry (each header's
//! length leads to the next slot), and stops at the first slot that is not a valid header
//! (the end mark, a torn header): nothing past that slot is read, so whatever part of it
//! persisted, the recovered state is the same.
//!
//! The rule: an entry's body and the end mark in the slot after it are durable before its
//! header's length is stored (the kernel fences between them). A violation is recorded
//! with its witness, and from then on nothing is pruned.

use crate::jbd2::{JournalViolation, LogKind};
use crate::pending::PmPending;
use crate::rule_log::RuleLog;
use crate::unit::{LINE, WORD};
use rustc_hash::FxHashSet;

/// Bytes of a header slot.
pub const ZIL_PMEM_SLOT: u64 = 256;
/// Bytes before the first chunk: the superblock's space.
pub const ZIL_PMEM_SUPERBLOCK_SPACE: u64 = 4096;
/// Where a header's length (of header, body and padding) lies in its slot.
const LENGTH_AT: u64 = 48;
/// Each word of the end mark's fields.
const END_WORD: u64 = u64::from_le_bytes(*b"ZILPMEND");

/// Whether an entry of `len` bytes at `slot` fits its chunk of `chunk_size` bytes: a whole
/// number of slots, a header and some body; a walk stops at a length that does not.
pub fn zil_pmem_entry_fits(slot: u64, len: u64, chunk_size: u64) -> bool {
    len.is_multiple_of(ZIL_PMEM_SLOT) && len >= 2 * ZIL_PMEM_SLOT && slot + len <= chunk_size
}

/// Where a ZIL-PMEM region lies in PM, as its superblock gives it
/// (`persim_image::zil_pmem_layout`), and where each chunk's walk stops in the initial
/// image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZilPmemLayout {
    /// PM offset of the superblock; chunk 0 follows its 4 KiB.
    pub start: u64,
    pub chunk_size: u64,
    /// Per chunk, the offset of the slot where its walk stops (at least as far as the
    /// kernel's, which also stops at a header that fails its checksum).
    pub ends: Vec<u64>,
}

impl ZilPmemLayout {
    fn chunks(&self) -> u64 {
        self.ends.len() as u64
    }

    fn chunk_start(&self, chunk: u64) -> u64 {
        self.start + ZIL_PMEM_SUPERBLOCK_SPACE + chunk * self.chunk_size
    }

    /// The chunk and offset in it of a PM address in the chunks.
    fn in_chunk(&self, addr: u64) -> Option<(u64, u64)> {
        let at = addr.checked_sub(self.start + ZIL_PMEM_SUPERBLOCK_SPACE)?;
        let chunk = at / self.chunk_size;
        (chunk < self.chunks()).then_some((chunk, at % self.chunk_size))
    }

    /// The lines of chunk `chunk` in [from, to), cut at its end.
    fn lines(&self, chunk: u64, from: u64, to: u64) -> impl Iterator<Item = u64> {
        let base = self.chunk_start(chunk);
        (from / LINE * LINE..to.min(self.chunk_size))
            .step_by(LINE as usize)
            .map(move |o| base + o)
    }
}

/// Follows one ZIL-PMEM region through a replay.
#[derive(Debug)]
pub struct ZilPmemLog {
    layout: ZilPmemLayout,
    /// Per chunk: the slot after its last header stored, and the farthest slot a crash
    /// image's walk can reach (the durable end and any end stored since its first slot
    /// was last clean).
    latest: Vec<u64>,
    floor: Vec<u64>,
    /// Chunks freed since their first slot was last clean.
    unsettled: FxHashSet<u64>,
    /// A store this model cannot read (the superblock rewritten, a length word stored in
    /// parts, a store over two chunks): nothing is protected from then on.
    lost: bool,
    rules: RuleLog,
}

impl ZilPmemLog {
    pub fn new(layout: ZilPmemLayout) -> ZilPmemLog {
        ZilPmemLog {
            latest: layout.ends.clone(),
            floor: layout.ends.clone(),
            unsettled: FxHashSet::default(),
            lost: false,
            layout,
            rules: RuleLog::new(LogKind::ZilPmem),
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
        let end = addr + data.len() as u64;
        let sb = self.layout.start;
        if addr < sb + ZIL_PMEM_SUPERBLOCK_SPACE && end > sb {
            self.lost = true;
            return;
        }
        let Some((chunk, offset)) = self.layout.in_chunk(addr) else {
            return;
        };
        if offset + data.len() as u64 > self.layout.chunk_size {
            // one store over two chunks: no writer of the format makes one
            self.lost = true;
            return;
        }
        // the slots whose length word (at 48) the store may touch
        let mut slot =
            (offset.saturating_sub(LENGTH_AT + WORD - 1)).next_multiple_of(ZIL_PMEM_SLOT);
        while slot + LENGTH_AT < offset + data.len() as u64 {
            let word = slot + LENGTH_AT;
            if word + WORD <= offset || slot > self.latest[chunk as usize] {
                slot += ZIL_PMEM_SLOT;
                continue;
            }
            if word < offset || word + WORD > offset + data.len() as u64 {
                // a length word at or before the walk's end, stored in parts
                self.lost = true;
                return;
            }
            let at = (word - offset) as usize;
            let value = u64::from_le_bytes(data[at..at + 8].try_into().expect("eight bytes"));
            self.length_stored(chunk, slot, value, entry, pending);
            slot += ZIL_PMEM_SLOT;
        }
    }

    /// The length word of the slot at `slot` (at or before the chunk's end) stored as
    /// `value`: a header, or the chunk freed (an end mark or zeros in its first slot).
    fn length_stored(
        &mut self,
        chunk: u64,
        slot: u64,
        value: u64,
        entry: u64,
        pending: &PmPending,
    ) {
        let i = chunk as usize;
        if value == END_WORD || value == 0 {
            if slot == 0 {
                self.latest[i] = 0;
                self.unsettled.insert(chunk);
            }
            return;
        }
        if !zil_pmem_entry_fits(slot, value, self.layout.chunk_size) {
            // no walk takes a slot whose length does not fit: it ends there
            return;
        }
        let dirty: Vec<u64> = self
            .layout
            .lines(chunk, slot + ZIL_PMEM_SLOT, slot + value + ZIL_PMEM_SLOT)
            .filter(|&l| pending.is_dirty(l))
            .collect();
        if !dirty.is_empty() && self.rules.holds() {
            self.rules.broke(entry, 1, chunk, dirty);
        }
        self.latest[i] = slot + value;
        self.floor[i] = self.floor[i].max(slot + value);
    }

    /// After a fence: a freed chunk whose first slot is clean ends its walk there, or at
    /// the headers stored since.
    pub fn fenced(&mut self, pending: &PmPending) {
        let layout = &self.layout;
        let (latest, floor) = (&self.latest, &mut self.floor);
        self.unsettled.retain(|&c| {
            let dirty = layout
                .lines(c, 0, ZIL_PMEM_SLOT)
                .any(|l| pending.is_dirty(l));
            if !dirty {
                floor[c as usize] = latest[c as usize];
            }
            dirty
        });
    }

    /// Whether `line`, dirty at a failure point, lies past the slot where its chunk's walk
    /// stops in every crash image: recovery never reads it.
    pub fn protects(&self, line: u64) -> bool {
        !self.lost
            && self
                .layout
                .in_chunk(line)
                .is_some_and(|(chunk, offset)| offset >= self.floor[chunk as usize] + ZIL_PMEM_SLOT)
    }
}
