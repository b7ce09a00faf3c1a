//! The counting mode (`count=on`): no trace, only counts of what the guest does between
//! `hypercall start` and `success`/`fail` (docs/guides/efficiency.md). Instructions and PM bytes
//! are counted by the QEMU glue (an inline add per translation block, a store callback);
//! this part keeps the phase, the NVMe bytes and writes the counts file.

use crate::tracer::followed;
use persim_abi::{Counts, PluginArgs};
use persim_trace::{Hypercall, Op};
use std::path::PathBuf;

/// Whether a kernel store of `value` (8 bytes) to guest-physical `slot` can be a
/// page-table entry that maps a PM page into user space: naturally aligned (entries fill their table page in
/// 8-byte slots), present, user-accessible, its frame in PM (a 4 KiB PTE's or a huge
/// PMD's/PUD's, whose frame bits are a subset). Until one is seen, user code cannot store
/// to PM and the counting mode leaves user stores uninstrumented; a store that only looks
/// like such an entry costs speed, never a count (the QEMU glue also checks that the
/// slot is in a page table).
pub fn maps_user_pm(slot: u64, value: u64, pm_base: u64, pm_size: u64) -> bool {
    const PRESENT_USER: u64 = 0b101;
    const FRAME: u64 = 0x000f_ffff_ffff_f000;
    slot.is_multiple_of(8)
        && value & PRESENT_USER == PRESENT_USER
        && (value & FRAME).wrapping_sub(pm_base) < pm_size
}

pub struct Counter {
    path: PathBuf,
    counting: bool,
    nvme_bytes_written: u64,
}

/// What the QEMU side must do after a hypercall.
#[derive(Debug, PartialEq, Eq)]
pub enum CounterNext {
    Continue,
    /// Counting starts: zero the glue's counters.
    Start,
    /// Counting ended: write the glue's counts with [`Counter::finish`].
    Finish,
}

impl Counter {
    pub fn new(args: &PluginArgs) -> Counter {
        Counter {
            path: args.trace.clone(),
            counting: false,
            nvme_bytes_written: 0,
        }
    }

    pub fn hypercall(&mut self, call: Hypercall) -> CounterNext {
        match (self.counting, call) {
            (false, Hypercall::Start) => {
                self.counting = true;
                self.nvme_bytes_written = 0;
                CounterNext::Start
            }
            (true, Hypercall::Success | Hypercall::Fail) => CounterNext::Finish,
            _ => CounterNext::Continue,
        }
    }

    /// Block operations decoded from the guest's NVMe commands.
    pub fn block(&mut self, ops: &[Op]) {
        if self.counting {
            for op in ops {
                if let Op::BlkWrite { data, .. } = op {
                    self.nvme_bytes_written += data.len() as u64;
                }
            }
        }
    }

    /// Writes the counts (the glue's with this side's NVMe bytes) where `trace` points.
    pub fn finish(&mut self, mut counts: Counts) -> Result<(), String> {
        self.counting = false;
        counts.nvme_bytes_written = self.nvme_bytes_written;
        let path = followed(&self.path);
        persim_trace::atomic_file::write_atomically(&path, counts.to_text().as_bytes())
            .map_err(|e| format!("cannot write the counts to {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_user_entry_with_a_pm_frame_maps_user_pm() {
        let (base, size) = (0x1_0000_0000, 64 << 20);
        let entry = 0x484_f990;
        let maps = |value| maps_user_pm(entry, value, base, size);
        // a 4 KiB PTE as the kernel writes it for a DAX mapping: NX, dirty, accessed,
        // user, writable, present
        assert!(maps((1 << 63) | (base + 0x3000) | 0x67));
        // a huge PMD (PSE) with its PAT bit (12) set
        assert!(maps((base + (2 << 20)) | 0x1000 | 0xe7));
        // a kernel mapping of PM, an absent entry, a frame in DRAM, one past the PM
        assert!(!maps((base + 0x3000) | 0x63));
        assert!(!maps((base + 0x3000) | 0x66));
        assert!(!maps(0x7000 | 0x67));
        assert!(!maps((base + size) | 0x67));
        // A kernel store seen in the overhead bench's workload on 6.1 (two u32 fields
        // written at once, 4-aligned): it looks like a PTE, but no entry is at that address.
        // It opened the gate in some runs, and user stores then cost every run's speed.
        assert!(!maps_user_pm(entry + 4, 0x1_0001_0007, base, size));
    }

    #[test]
    fn counts_nvme_writes_between_start_and_success_and_writes_them_where_the_link_points() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run-1.counts");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut c = Counter::new(&PluginArgs {
            tracing: false,
            count: true,
            repeat: true,
            ..PluginArgs::new(0, 1 << 20, link)
        });
        let write = |n: usize| Op::BlkWrite {
            offset: 0,
            data: vec![0; n],
        };
        c.block(&[write(512)]); // before start: not counted
        assert_eq!(c.hypercall(Hypercall::Start), CounterNext::Start);
        assert!(c.counting);
        c.block(&[write(4096), Op::BlkFlush, write(1024)]);
        assert_eq!(c.hypercall(Hypercall::Success), CounterNext::Finish);
        c.finish(Counts {
            kernel_instructions: 10,
            user_instructions: 20,
            pm_bytes_written: 30,
            nvme_bytes_written: 0,
            user_stores_counted: true,
            kernel_blocks: vec![(0xffff_ffff_8100_0000, 7)],
        })
        .unwrap();
        let counts = Counts::parse(&std::fs::read_to_string(&target).unwrap()).unwrap();
        assert_eq!(
            counts,
            Counts {
                kernel_instructions: 10,
                user_instructions: 20,
                pm_bytes_written: 30,
                nvme_bytes_written: 5120,
                user_stores_counted: true,
                kernel_blocks: vec![(0xffff_ffff_8100_0000, 7)],
            }
        );
        assert!(!c.counting);
        // the next run starts from zero
        assert_eq!(c.hypercall(Hypercall::Start), CounterNext::Start);
        c.block(&[write(512)]);
        c.finish(Counts::default()).unwrap();
        let counts = Counts::parse(&std::fs::read_to_string(&target).unwrap()).unwrap();
        assert_eq!(counts.nvme_bytes_written, 512);
    }
}
