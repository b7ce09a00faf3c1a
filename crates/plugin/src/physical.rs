//! Guest-physical memory: reading it, and translating a program's virtual addresses
//! through its page tables (for `hypercall volatile`, whose range is the program's own).
//! The guest runs with 4-level paging (the VM's kernel command line asks for it).

/// Reads guest-physical memory (the NVMe queues and data pages, page tables).
pub trait PhysMemory {
    fn read(&mut self, paddr: u64, buf: &mut [u8]) -> bool;
}

const PRESENT: u64 = 1;
/// In a PDPT or PD entry: it maps a 1 GiB or 2 MiB page instead of pointing to a table.
const HUGE: u64 = 1 << 7;
/// Bits 51:12 of an entry: the physical address of a table or 4 KiB page.
const ADDRESS: u64 = 0x000f_ffff_ffff_f000;

/// The physical address of `vaddr` and the bytes left in its page, through the page tables
/// at `cr3`; `None` when a level is not present or unreadable.
pub fn translate(mem: &mut impl PhysMemory, cr3: u64, vaddr: u64) -> Option<(u64, u64)> {
    let mut table = cr3 & ADDRESS;
    // PML4, PDPT, PD, PT: 9 bits of the address each, from bit 39 down.
    for shift in [39u32, 30, 21, 12] {
        let index = (vaddr >> shift) & 0x1ff;
        let mut entry = [0u8; 8];
        if !mem.read(table + index * 8, &mut entry) {
            return None;
        }
        let entry = u64::from_le_bytes(entry);
        if entry & PRESENT == 0 {
            return None;
        }
        let page = 1u64 << shift;
        if shift == 12 || (shift != 39 && entry & HUGE != 0) {
            let offset = vaddr & (page - 1);
            return Some(((entry & ADDRESS & !(page - 1)) + offset, page - offset));
        }
        table = entry & ADDRESS;
    }
    unreachable!("the last level always maps a page")
}

/// The physical runs of `len` bytes at `vaddr`, adjacent pages merged, or the first
/// virtual address that is not mapped.
pub fn physical_runs(
    mem: &mut impl PhysMemory,
    cr3: u64,
    vaddr: u64,
    len: u64,
) -> Result<Vec<(u64, u64)>, u64> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut at = vaddr;
    let end = vaddr.saturating_add(len);
    while at < end {
        let (paddr, left) = translate(mem, cr3, at).ok_or(at)?;
        let n = left.min(end - at);
        match runs.last_mut() {
            Some((start, run)) if *start + *run == paddr => *run += n,
            _ => runs.push((paddr, n)),
        }
        at += n;
    }
    Ok(runs)
}

/// Whether the page at physical address `page` is a table below the root at `cr3` in the
/// half that maps user space (a PDPT, a PD or a PT): a store to it writes a page-table
/// entry of that address space.
pub fn is_user_table(mem: &mut impl PhysMemory, cr3: u64, page: u64) -> bool {
    // The root's lower 256 entries map user space.
    let mut root = [0u8; 2048];
    mem.read(cr3 & ADDRESS, &mut root) && has_table(mem, &root, 2, page)
}

/// Whether a present entry of `entries` points to the table `page`, or, `below` levels
/// further down, one of the tables they point to.
fn has_table(mem: &mut impl PhysMemory, entries: &[u8], below: u32, page: u64) -> bool {
    entries.chunks_exact(8).any(|entry| {
        let entry = u64::from_le_bytes(entry.try_into().unwrap());
        if entry & PRESENT == 0 || entry & HUGE != 0 {
            return false;
        }
        let table = entry & ADDRESS;
        let mut entries = [0u8; 4096];
        table == page
            || below > 0
                && mem.read(table, &mut entries)
                && has_table(mem, &entries, below - 1, page)
    })
}

#[cfg(test)]
pub mod fake {
    use super::PhysMemory;
    use std::collections::BTreeMap;

    /// Guest memory as sparse bytes; unwritten memory cannot be read.
    #[derive(Default)]
    pub struct SparseMemory(BTreeMap<u64, u8>);

    impl SparseMemory {
        pub fn put(&mut self, addr: u64, bytes: &[u8]) {
            for (i, b) in bytes.iter().enumerate() {
                self.0.insert(addr + i as u64, *b);
            }
        }
    }

    impl PhysMemory for SparseMemory {
        fn read(&mut self, paddr: u64, buf: &mut [u8]) -> bool {
            for (i, b) in buf.iter_mut().enumerate() {
                match self.0.get(&(paddr + i as u64)) {
                    Some(v) => *b = *v,
                    None => return false,
                }
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::SparseMemory;
    use super::*;

    const CR3: u64 = 0x1000;
    const PDPT: u64 = 0x2000;
    const PD: u64 = 0x3000;
    const PT: u64 = 0x4000;
    /// A user address: PML4 index 0xff, PDPT 1, PD 2, PT 3.
    const VA: u64 = 0xff << 39 | 1 << 30 | 2 << 21 | 3 << 12;

    fn entry(mem: &mut SparseMemory, table: u64, index: u64, value: u64) {
        mem.put(table + index * 8, &value.to_le_bytes());
    }

    /// Tables down to a PD; `pd_entry` decides the rest.
    fn tables(pd_entry: u64) -> SparseMemory {
        let mut mem = SparseMemory::default();
        // Flag bits (writable, user, accessed, NX) must not leak into addresses.
        let flags = 0x67 | 1 << 63;
        entry(&mut mem, CR3, 0xff, PDPT | flags);
        entry(&mut mem, PDPT, 1, PD | flags);
        entry(&mut mem, PD, 2, pd_entry);
        mem
    }

    #[test]
    fn walks_four_levels_to_a_4k_page() {
        let mut mem = tables(PT | 0x67);
        entry(&mut mem, PT, 3, 0x1_2345_6000 | 0x67 | 1 << 63);
        entry(&mut mem, PT, 4, 0x1_2345_7000 | 0x67);
        // PCID bits in cr3 are not part of the table's address.
        assert_eq!(
            translate(&mut mem, CR3 | 0x5, VA + 0x10),
            Some((0x1_2345_6010, 0xff0))
        );
        // Two adjacent physical pages make one run; a range into an unmapped page stops there.
        assert_eq!(
            physical_runs(&mut mem, CR3, VA + 0xff0, 0x20),
            Ok(vec![(0x1_2345_6ff0, 0x20)])
        );
        assert_eq!(
            physical_runs(&mut mem, CR3, VA + 0x1ff0, 0x20),
            Err(VA + 0x2000)
        );
    }

    #[test]
    fn a_2m_page_ends_the_walk_at_the_pd() {
        // DAX maps PM with 2 MiB pages where it can.
        let mut mem = tables(0x1_4000_0000 | HUGE | 0x67);
        assert_eq!(
            translate(&mut mem, CR3, VA + 0x10),
            Some((
                0x1_4000_0000 + (3 << 12) + 0x10,
                (1 << 21) - (3 << 12) - 0x10
            ))
        );
    }

    #[test]
    fn a_1g_page_ends_the_walk_at_the_pdpt() {
        let mut mem = SparseMemory::default();
        entry(&mut mem, CR3, 0xff, PDPT | 0x67);
        entry(&mut mem, PDPT, 1, 0x1_c000_0000 | HUGE | 0x67);
        let offset = VA & ((1 << 30) - 1);
        assert_eq!(
            translate(&mut mem, CR3, VA),
            Some((0x1_c000_0000 + offset, (1 << 30) - offset))
        );
    }

    #[test]
    fn the_user_tables_of_an_address_space_are_found_at_every_level() {
        let mut mem = SparseMemory::default();
        for table in [CR3, PDPT, PD, PT, 0x5000, 0x6000] {
            mem.put(table, &[0; 4096]);
        }
        entry(&mut mem, CR3, 0xff, PDPT | 0x67);
        entry(&mut mem, PDPT, 1, PD | 0x67);
        entry(&mut mem, PD, 2, PT | 0x67);
        // a 2 MiB page beside the PT: it points to no table
        entry(&mut mem, PD, 3, 0x1_4000_0000 | HUGE | 0x67);
        // kernel space (the root's upper half) has tables too: not user tables
        entry(&mut mem, CR3, 0x111, 0x5000 | 0x63);
        for table in [PDPT, PD, PT] {
            assert!(is_user_table(&mut mem, CR3 | 0x5, table), "{table:#x}");
        }
        for page in [CR3, 0x5000, 0x6000, 0x1_4000_0000] {
            assert!(!is_user_table(&mut mem, CR3, page), "{page:#x}");
        }
        // a table reached only through an entry that is not present
        entry(&mut mem, PD, 4, 0x6000 | 0x66);
        assert!(!is_user_table(&mut mem, CR3, 0x6000));
    }

    #[test]
    fn a_missing_level_is_no_translation() {
        let mut mem = tables(PT | 0x66); // PD entry not present
        assert_eq!(translate(&mut mem, CR3, VA), None);
        assert_eq!(translate(&mut SparseMemory::default(), CR3, VA), None);
    }
}
