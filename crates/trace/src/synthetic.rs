//! A deterministic synthetic trace shaped like a DAX file system's: small metadata stores
//! made durable with clwb + sfence, file data copied with 64-byte non-temporal stores,
//! journal appends, and checkpoints. For benchmarks and size measurements of every stage
//! (`persim trace synth` writes one to a file). With [`FsLike::with_tasks`], several
//! threads take turns, as a traced run of concurrent programs records them.

use crate::{Entry, FenceKind, FlushKind, Hypercall, Meta, Op, Task};

const METADATA: u64 = 0x1_0000;
const JOURNAL: u64 = 0x4_0000;
const JOURNAL_LEN: u64 = 0x1_0000;
const DATA: u64 = 0x10_0000;
/// File data wraps around in this many bytes, so traces of any length fit in [`PM_SIZE`].
const DATA_LEN: u64 = 0x70_0000;
/// The PM size every synthetic trace fits in (8 MiB).
pub const PM_SIZE: u64 = DATA + DATA_LEN;
const KERNEL_TEXT: u64 = 0xffff_ffff_8100_0000;

pub struct FsLike {
    rng: u64,
    with_pc: bool,
    queue: Vec<Entry>,
    journal_head: u64,
    file_offset: u64,
    checkpoint: u64,
    clock: u64,
    /// Threads that take turns (0: entries carry no task).
    tasks: u32,
    /// The running thread, once one ran.
    thread: Option<u32>,
    /// The thread the next entry is the first of.
    switched_to: Option<Task>,
}

impl FsLike {
    /// `with_pc` attaches a program counter to every store and flush, as the tracer does
    /// when asked for metadata.
    pub fn new(seed: u64, with_pc: bool) -> Self {
        FsLike {
            rng: seed | 1,
            with_pc,
            queue: Vec::new(),
            journal_head: 0,
            file_offset: 0,
            checkpoint: 0,
            clock: 1_700_000_000,
            tasks: 0,
            thread: None,
            switched_to: None,
        }
    }

    /// `tasks` threads, two per process, take turns: every operation switches to another
    /// one with probability 1/4.
    pub fn with_tasks(mut self, tasks: u32) -> Self {
        self.tasks = tasks;
        self
    }

    fn switch_task(&mut self) {
        if self.tasks == 0 || (self.thread.is_some() && self.below(4) != 0) {
            return;
        }
        let thread = self.below(u64::from(self.tasks)) as u32;
        if self.thread.replace(thread) == Some(thread) {
            return;
        }
        self.switched_to = Some(Task {
            pid: 1000 + thread / 2 * 2,
            tid: 1000 + thread,
            comm: format!("worker{}", thread / 2),
        });
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift64*: fast, and good enough to vary the shape of operations.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn push(&mut self, op: Op) {
        let pc = match op {
            Op::Write { .. } | Op::Flush { .. } if self.with_pc => {
                Some(KERNEL_TEXT + 0x10_0000 + self.below(64) * 0x1c4)
            }
            _ => None,
        };
        self.queue.push(Entry {
            op,
            meta: Meta {
                pc,
                stack: Vec::new(),
                task: self.switched_to.take(),
            },
        });
    }

    fn make_durable(&mut self, lines: &[u64]) {
        for &line in lines {
            self.push(Op::Flush {
                kind: FlushKind::Clwb,
                addr: line,
            });
        }
        self.push(Op::Fence(FenceKind::Sfence));
    }

    /// An inode or bitmap update: a few small stores near each other.
    fn metadata_update(&mut self) {
        let base = METADATA + self.below(512) * 256;
        let mut lines = Vec::new();
        for _ in 0..2 + self.below(5) {
            let size = [1usize, 2, 4, 8, 8, 8][self.below(6) as usize];
            let addr = base + self.below(256 / 8) * 8;
            self.clock += self.below(3);
            let data = self.clock.to_le_bytes()[..size].to_vec();
            self.push(Op::Write {
                addr,
                data,
                nt: false,
            });
            if !lines.contains(&(addr & !63)) {
                lines.push(addr & !63);
            }
        }
        self.make_durable(&lines);
    }

    /// File data copied with non-temporal stores: text-like content.
    fn data_write(&mut self) {
        for _ in 0..1 + self.below(8) {
            let fill = b'a' + self.below(26) as u8;
            let mut data = vec![fill; 64];
            data[..8].copy_from_slice(&self.file_offset.to_le_bytes());
            self.push(Op::Write {
                addr: DATA + self.file_offset,
                data,
                nt: true,
            });
            self.file_offset = (self.file_offset + 64) % DATA_LEN;
        }
        self.push(Op::Fence(FenceKind::Sfence));
    }

    /// A journal transaction: descriptor words, then a commit word.
    fn journal_commit(&mut self) {
        let mut lines = Vec::new();
        for _ in 0..4 {
            let addr = JOURNAL + self.journal_head;
            let data = (METADATA + self.below(512) * 256).to_le_bytes().to_vec();
            self.push(Op::Write {
                addr,
                data,
                nt: false,
            });
            lines.push(addr & !63);
            self.journal_head = (self.journal_head + 8) % JOURNAL_LEN;
        }
        lines.dedup();
        self.make_durable(&lines);
        let addr = JOURNAL + self.journal_head;
        self.push(Op::Write {
            addr,
            data: 0xc03b_3998u64.to_le_bytes().to_vec(),
            nt: false,
        });
        self.journal_head = (self.journal_head + 8) % JOURNAL_LEN;
        self.make_durable(&[addr & !63]);
    }

    fn refill(&mut self) {
        self.switch_task();
        match self.below(100) {
            0..=59 => self.metadata_update(),
            60..=84 => self.data_write(),
            85..=97 => self.journal_commit(),
            _ => {
                self.checkpoint += 1;
                self.push(Op::Hypercall(Hypercall::Checkpoint(self.checkpoint)));
            }
        }
        self.queue.reverse();
    }
}

impl Iterator for FsLike {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        if self.queue.is_empty() {
            self.refill();
        }
        self.queue.pop()
    }
}
