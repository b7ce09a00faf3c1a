//! The counting mode's kernel `rep movs`/`rep stos`: their PM bytes accounted once per
//! execution instead of with a callback per element (docs/results/performance.md, "Counting mode").
//!
//! At the start of an execution (an instruction callback: QEMU enters the instruction
//! again after every batch of iterations, interrupt or fault) the destination's pages are
//! translated, in the direction of the copy, as far as they are mapped. The elements stored
//! are counted by an inline add per store (no callback), and the next execution on the same
//! vCPU, or the end of counting, settles this one from that count: an execution stores
//! the first bytes of its destination in the direction of the copy, however it stops.

use crate::physical::{translate, PhysMemory};
use persim_abi::machine::{DIRECT_MAP_BASE, DIRECT_MAP_SIZE};

/// The iterations QEMU 10 runs at most before it leaves the instruction and enters it again
/// (until the low 16 bits of rcx are zero): the pages translated at the start. Pages
/// stored beyond them are translated when settling.
const BATCH: u64 = 1 << 16;

/// One execution of a rep string store, waiting to be settled.
#[derive(Debug)]
pub struct Execution {
    /// The page tables at the start, for pages translated only when settling.
    cr3: u64,
    /// The destination's bytes, `[lo, hi)`: filled upwards from `lo`, or downwards from
    /// `hi` with the direction flag set.
    lo: u64,
    hi: u64,
    down: bool,
    /// The destination's physical runs in the order they are stored, each
    /// `(virtual start, physical start, length)` with its lowest addresses.
    runs: Vec<(u64, u64, u64)>,
    /// The bytes the runs cover, from the first stored.
    covered: u64,
    /// The vCPU's count of stored bytes at the start.
    pub stored_before: u64,
}

impl Execution {
    /// An execution storing `count` elements of `size` bytes at `rdi` (downwards if
    /// `down`), with the pages translated through `cr3`.
    pub fn new(
        mem: &mut impl PhysMemory,
        cr3: u64,
        rdi: u64,
        count: u64,
        size: u64,
        down: bool,
        stored_before: u64,
    ) -> Execution {
        let total = count.saturating_mul(size);
        let (lo, hi) = match down {
            false => (rdi, rdi.saturating_add(total)),
            true => {
                let hi = rdi.saturating_add(size);
                (hi.saturating_sub(total), hi)
            }
        };
        let mut e = Execution {
            cr3,
            lo,
            hi,
            down,
            runs: Vec::new(),
            covered: 0,
            stored_before,
        };
        e.translate(mem, BATCH.saturating_mul(size));
        e
    }

    /// Translates further pages until `bytes` are covered, the destination's end, or a page
    /// that is not mapped (the instruction faults there, and that ends the execution).
    fn translate(&mut self, mem: &mut impl PhysMemory, bytes: u64) {
        let total = self.hi - self.lo;
        while self.covered < total.min(bytes) {
            let left = total - self.covered;
            let run = match self.down {
                false => {
                    let at = self.lo + self.covered;
                    page(mem, self.cr3, at).map(|(paddr, n)| (at, paddr, n.min(left)))
                }
                true => {
                    // The 4 KiB page of the next byte down is mapped contiguously, whatever
                    // the size of the page that holds it.
                    let end = self.hi - self.covered;
                    let start = ((end - 1) & !0xfff).max(self.lo);
                    page(mem, self.cr3, start).map(|(paddr, _)| (start, paddr, end - start))
                }
            };
            let Some(run) = run else { break };
            self.covered += run.2;
            self.runs.push(run);
        }
    }

    /// The PM bytes among the first `stored` bytes of the destination, PM being
    /// `[pm_base, pm_base + pm_size)`. Stored bytes beyond the pages translated at the
    /// start (a page mapped meanwhile by another vCPU) are translated now.
    pub fn pm_bytes(
        &mut self,
        mem: &mut impl PhysMemory,
        stored: u64,
        pm_base: u64,
        pm_size: u64,
    ) -> u64 {
        if stored > self.covered {
            self.translate(mem, stored);
        }
        let mut left = stored;
        let mut pm = 0;
        for &(_, paddr, len) in &self.runs {
            if left == 0 {
                break;
            }
            let n = left.min(len);
            let start = match self.down {
                false => paddr,
                true => paddr + len - n,
            };
            let lo = start.max(pm_base);
            let hi = (start + n).min(pm_base.saturating_add(pm_size));
            pm += hi.saturating_sub(lo);
            left -= n;
        }
        pm
    }
}

/// The physical address of `vaddr` and the bytes mapped contiguously from it: through the
/// direct map without reading page tables (its mapping is linear), else through them.
fn page(mem: &mut impl PhysMemory, cr3: u64, vaddr: u64) -> Option<(u64, u64)> {
    match vaddr.wrapping_sub(DIRECT_MAP_BASE) {
        offset if offset < DIRECT_MAP_SIZE => Some((offset, DIRECT_MAP_SIZE - offset)),
        _ => translate(mem, cr3, vaddr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::physical::fake::SparseMemory;

    const PM_BASE: u64 = 0x1_0000_0000;
    const PM_SIZE: u64 = 64 << 20;
    const CR3: u64 = 0x1000;

    /// Page tables at CR3 mapping user page `0x40_0000 + i * 4096` to frame `frames[i]`
    /// (0: not mapped).
    fn user_pages(frames: &[u64]) -> SparseMemory {
        let mut mem = SparseMemory::default();
        // PML4[0] -> PDPT at 0x2000, PDPT[0] -> PD at 0x3000, PD[2] -> PT at 0x4000
        mem.put(CR3, &(0x2000u64 | 0x67).to_le_bytes());
        mem.put(0x2000, &(0x3000u64 | 0x67).to_le_bytes());
        mem.put(0x3000 + 2 * 8, &(0x4000u64 | 0x67).to_le_bytes());
        for (i, &frame) in frames.iter().enumerate() {
            let entry = if frame == 0 { 0 } else { frame | 0x67 };
            mem.put(0x4000 + i as u64 * 8, &entry.to_le_bytes());
        }
        mem
    }

    const USER: u64 = 0x40_0000;

    #[test]
    fn a_copy_through_the_direct_map_counts_the_stored_bytes_in_pm() {
        let mut mem = SparseMemory::default();
        // 16 KiB from 4 KiB below PM's start: the first 4 KiB are DRAM
        let rdi = DIRECT_MAP_BASE + PM_BASE - 4096;
        let mut e = Execution::new(&mut mem, CR3, rdi, 2048, 8, false, 7);
        assert_eq!(e.stored_before, 7);
        assert_eq!(e.pm_bytes(&mut mem, 0, PM_BASE, PM_SIZE), 0);
        assert_eq!(e.pm_bytes(&mut mem, 4096, PM_BASE, PM_SIZE), 0);
        assert_eq!(e.pm_bytes(&mut mem, 5000, PM_BASE, PM_SIZE), 904);
        assert_eq!(e.pm_bytes(&mut mem, 16384, PM_BASE, PM_SIZE), 12288);
    }

    #[test]
    fn a_user_destination_is_translated_page_by_page_and_stops_at_a_hole() {
        // DRAM, PM, PM, not mapped, PM
        let mut mem = user_pages(&[0x9000, PM_BASE + 0x5000, PM_BASE, 0, PM_BASE + 0x8000]);
        let mut e = Execution::new(&mut mem, CR3, USER + 0x800, 5 << 12, 1, false, 0);
        // 0x800 bytes of DRAM, then two PM pages; the fault at the hole ends the execution
        assert_eq!(e.pm_bytes(&mut mem, 0x800, PM_BASE, PM_SIZE), 0);
        assert_eq!(e.pm_bytes(&mut mem, 0x1000, PM_BASE, PM_SIZE), 0x800);
        assert_eq!(e.pm_bytes(&mut mem, 0x2800, PM_BASE, PM_SIZE), 0x2000);
        assert_eq!(e.runs.len(), 3);
    }

    #[test]
    fn a_page_mapped_after_the_start_is_translated_when_settling() {
        let mut mem = user_pages(&[PM_BASE, 0]);
        let mut e = Execution::new(&mut mem, CR3, USER, 2 << 12, 1, false, 0);
        assert_eq!(e.covered, 4096);
        // another vCPU maps the second page to PM while this one stores
        mem.put(0x4000 + 8, &((PM_BASE + 0x1000) | 0x67).to_le_bytes());
        assert_eq!(e.pm_bytes(&mut mem, 6000, PM_BASE, PM_SIZE), 6000);
    }

    #[test]
    fn a_downward_copy_stores_from_the_top_of_its_destination() {
        // DRAM, PM
        let mut mem = user_pages(&[0x9000, PM_BASE]);
        // 3000 elements of 4 bytes whose last (first stored) one is at the top of page 1
        let rdi = USER + 0x2000 - 4;
        let mut e = Execution::new(&mut mem, CR3, rdi, 3000, 4, true, 0);
        assert_eq!((e.lo, e.hi), (USER + 0x2000 - 12000, USER + 0x2000));
        assert_eq!(e.pm_bytes(&mut mem, 4, PM_BASE, PM_SIZE), 4);
        assert_eq!(e.pm_bytes(&mut mem, 4096, PM_BASE, PM_SIZE), 4096);
        assert_eq!(e.pm_bytes(&mut mem, 12000, PM_BASE, PM_SIZE), 4096);
    }

    #[test]
    fn only_a_batch_of_pages_is_translated_at_the_start() {
        let mut mem = user_pages(&[PM_BASE; 32]);
        let mut e = Execution::new(&mut mem, CR3, USER, 32 << 12, 1, false, 0);
        assert_eq!(e.covered, 16 << 12);
        assert_eq!(e.pm_bytes(&mut mem, 20 << 12, PM_BASE, PM_SIZE), 20 << 12);
    }

    #[test]
    fn nothing_is_stored_without_elements() {
        let mut mem = SparseMemory::default();
        let mut e = Execution::new(&mut mem, CR3, DIRECT_MAP_BASE + PM_BASE, 0, 8, false, 0);
        assert!(e.runs.is_empty());
        assert_eq!(e.pm_bytes(&mut mem, 0, PM_BASE, PM_SIZE), 0);
    }
}
