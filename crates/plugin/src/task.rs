//! Which guest thread runs (docs/design/tracer.md, "Processes and threads"): the kernel's
//! per-CPU pointer to the running task is watched for stores (a thread switch writes it),
//! and the task's ids and name are read from its `task_struct` when the next entry is
//! recorded. Where those fields lie in `task_struct` depends on the kernel's build, so they
//! are found at `hypercall start` in the task of the `hypercall` process itself, whose pid
//! and name are known.

use persim_trace::Task;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The name of the process that makes the `start` hypercall (the guest tool).
pub const CALLER_COMM: &[u8] = b"hypercall";
/// Bytes of `task_struct` searched for the fields: past `pid` and `comm` in every kernel
/// Persim boots (6.1, 6.12), within the object (its slab object is larger still).
pub const TASK_SEARCHED: usize = 0x2000;
/// `TASK_COMM_LEN`: the name field's size, NUL-padded.
const COMM_LEN: usize = 16;

/// Offsets of the fields read from a `task_struct`: `pid` (the thread id), followed by
/// `tgid` (the process id), and `comm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLayout {
    pub pid: u64,
    pub comm: u64,
}

impl TaskLayout {
    /// Finds the fields in the first bytes of the caller's `task_struct`: the first 4-byte
    /// aligned pair of equal u32s holding `pid` (a single-threaded process's thread id is
    /// its process id), and [`CALLER_COMM`] NUL-terminated.
    pub fn find(task: &[u8], pid: u32) -> Option<TaskLayout> {
        let word = |at: usize| u32::from_le_bytes(task[at..at + 4].try_into().unwrap());
        let pid_at = (0..task.len().saturating_sub(7))
            .step_by(4)
            .find(|&at| word(at) == pid && word(at + 4) == pid)?;
        let mut name = CALLER_COMM.to_vec();
        name.push(0);
        let comm_at = task.windows(name.len()).position(|w| w == name)?;
        Some(TaskLayout {
            pid: pid_at as u64,
            comm: comm_at as u64,
        })
    }

    /// The thread of the `task_struct` at `task`, through `read` (guest virtual memory).
    pub fn read(&self, task: u64, mut read: impl FnMut(u64, &mut [u8]) -> bool) -> Option<Task> {
        let mut ids = [0u8; 8];
        let mut comm = [0u8; COMM_LEN];
        if !read(task + self.pid, &mut ids) || !read(task + self.comm, &mut comm) {
            return None;
        }
        let end = comm.iter().position(|&b| b == 0).unwrap_or(COMM_LEN);
        Some(Task {
            tid: u32::from_le_bytes(ids[..4].try_into().unwrap()),
            pid: u32::from_le_bytes(ids[4..].try_into().unwrap()),
            comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
        })
    }
}

/// The running task as the stores of the guest show it, shared without a lock: every store
/// is checked against two addresses, so this is on the hottest path.
#[derive(Default)]
pub struct TaskWatch {
    /// Virtual address of the per-CPU pointer to the running task (0: not watched).
    slot: AtomicU64,
    current: AtomicU64,
    /// Where the running task's name is (a thread names itself, `exec` renames).
    comm_at: AtomicU64,
    comm_offset: AtomicU64,
    /// The thread or its name changed since the last entry.
    changed: AtomicBool,
}

impl TaskWatch {
    pub const fn new() -> TaskWatch {
        TaskWatch {
            slot: AtomicU64::new(0),
            current: AtomicU64::new(0),
            comm_at: AtomicU64::new(0),
            comm_offset: AtomicU64::new(0),
            changed: AtomicBool::new(false),
        }
    }

    /// Watches `slot`, which holds `current` now.
    pub fn watch(&self, slot: u64, current: u64, layout: TaskLayout) {
        self.comm_offset.store(layout.comm, Ordering::Relaxed);
        self.switch(current);
        self.slot.store(slot, Ordering::Relaxed);
    }

    pub fn stop(&self) {
        self.slot.store(0, Ordering::Relaxed);
        self.comm_at.store(0, Ordering::Relaxed);
    }

    fn switch(&self, task: u64) {
        self.current.store(task, Ordering::Relaxed);
        let offset = self.comm_offset.load(Ordering::Relaxed);
        self.comm_at.store(task + offset, Ordering::Relaxed);
        self.changed.store(true, Ordering::Relaxed);
    }

    /// A store of the guest at `vaddr`; `value` gives the 8 bytes it stores.
    pub fn on_store(&self, vaddr: u64, value: impl FnOnce() -> u64) {
        let slot = self.slot.load(Ordering::Relaxed);
        if slot == 0 {
            return;
        }
        if vaddr == slot {
            self.switch(value());
        } else if vaddr.wrapping_sub(self.comm_at.load(Ordering::Relaxed)) < COMM_LEN as u64 {
            self.changed.store(true, Ordering::Relaxed);
        }
    }

    /// The running task's pointer if it changed since the last call.
    pub fn take_change(&self) -> Option<u64> {
        self.changed
            .swap(false, Ordering::Relaxed)
            .then(|| self.current.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up `task_struct`: decoy equal pairs and a decoy name before the fields.
    fn task_struct(pid: u32, tgid: u32, comm: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; 0x900];
        t[0x10..0x14].copy_from_slice(&pid.to_le_bytes()); // pid once, not a pair
        t[0x40..0x44].copy_from_slice(&7u32.to_le_bytes());
        t[0x44..0x48].copy_from_slice(&7u32.to_le_bytes());
        t[0x100..0x10a].copy_from_slice(b"hypercallX");
        t[0x5c4..0x5c8].copy_from_slice(&pid.to_le_bytes());
        t[0x5c8..0x5cc].copy_from_slice(&tgid.to_le_bytes());
        t[0x778..0x778 + comm.len()].copy_from_slice(comm);
        t
    }

    #[test]
    fn finds_the_fields_by_the_callers_pid_and_name() {
        let t = task_struct(812, 812, b"hypercall");
        let layout = TaskLayout::find(&t, 812).unwrap();
        assert_eq!(
            layout,
            TaskLayout {
                pid: 0x5c4,
                comm: 0x778
            }
        );
        assert_eq!(TaskLayout::find(&t, 813), None);
        assert_eq!(TaskLayout::find(&task_struct(812, 812, b"sh"), 812), None);
    }

    #[test]
    fn reads_a_threads_ids_and_name() {
        let t = task_struct(901, 900, b"fs-ops");
        let layout = TaskLayout {
            pid: 0x5c4,
            comm: 0x778,
        };
        let base = 0xffff_8880_0400_0000;
        let read = |addr: u64, buf: &mut [u8]| {
            let at = (addr - base) as usize;
            buf.copy_from_slice(&t[at..at + buf.len()]);
            true
        };
        assert_eq!(
            layout.read(base, read),
            Some(Task {
                pid: 900,
                tid: 901,
                comm: "fs-ops".into()
            })
        );
        assert_eq!(layout.read(base, |_, _| false), None);
    }

    #[test]
    fn a_switch_or_a_rename_is_a_change_once() {
        let w = TaskWatch::new();
        let layout = TaskLayout {
            pid: 0x5c4,
            comm: 0x778,
        };
        w.on_store(0x2_0a40, || unreachable!("not watched yet"));
        w.watch(0x2_0a40, 0x1000, layout);
        assert_eq!(w.take_change(), Some(0x1000));
        assert_eq!(w.take_change(), None);
        w.on_store(0x5000, || unreachable!("not the slot"));
        assert_eq!(w.take_change(), None);
        w.on_store(0x2_0a40, || 0x3000);
        assert_eq!(w.take_change(), Some(0x3000));
        // exec renames the running task: its name's bytes, not the old task's.
        w.on_store(0x1000 + 0x778, || 0);
        assert_eq!(w.take_change(), None);
        w.on_store(0x3000 + 0x778 + 15, || 0);
        assert_eq!(w.take_change(), Some(0x3000));
        w.stop();
        w.on_store(0x2_0a40, || unreachable!("stopped"));
    }
}
