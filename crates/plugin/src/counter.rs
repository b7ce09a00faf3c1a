//! The counting mode (`count=on`): no trace, only counts of what the guest does between
//! `hypercall start` and `success`/`fail` (docs/efficiency.md). Instructions and PM bytes
//! are counted by the QEMU glue (an inline add per translation block, a store callback);
//! this part keeps the phase, the NVMe bytes and writes the counts file.

use crate::tracer::followed;
use persim_abi::{Counts, PluginArgs};
use persim_trace::{Hypercall, Op};
use std::path::PathBuf;

pub struct Counter {
    path: PathBuf,
    counting: bool,
    nvme_bytes_written: u64,
}

/// What the QEMU side must do after a hypercall.
#[derive(Debug, PartialEq, Eq)]
pub enum CounterNext {
    Continue,
    /// Counting starts: retranslate everything so it gets instrumented (and zero the
    /// glue's counters).
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

    pub fn counting(&self) -> bool {
        self.counting
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
        assert!(c.counting());
        c.block(&[write(4096), Op::BlkFlush, write(1024)]);
        assert_eq!(c.hypercall(Hypercall::Success), CounterNext::Finish);
        c.finish(Counts {
            kernel_instructions: 10,
            user_instructions: 20,
            pm_bytes_written: 30,
            nvme_bytes_written: 0,
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
            }
        );
        assert!(!c.counting());
        // the next run starts from zero
        assert_eq!(c.hypercall(Hypercall::Start), CounterNext::Start);
        c.block(&[write(512)]);
        c.finish(Counts::default()).unwrap();
        let counts = Counts::parse(&std::fs::read_to_string(&target).unwrap()).unwrap();
        assert_eq!(counts.nvme_bytes_written, 512);
    }
}
