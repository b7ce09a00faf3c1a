//! What the plugin records, independent of QEMU: the tracing phase, the fence rules and
//! the translation of flushed virtual addresses to PM offsets.

use persim_abi::machine::{DIRECT_MAP_BASE, DIRECT_MAP_SIZE};
use persim_abi::{PluginArgs, Stacks};
use persim_trace::{
    Arg, BackgroundWriter, Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op, Task,
};
use std::collections::HashMap;

const PAGE_SHIFT: u32 = 12;
const LINE: u64 = 64;

/// How a store instruction writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    Cached,
    NonTemporal,
    /// movs/stos: cached, reported by QEMU element by element, merged by the tracer.
    String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    BeforeStart,
    Tracing,
    Done,
}

pub struct Tracer {
    args: PluginArgs,
    phase: Phase,
    writer: Option<BackgroundWriter>,
    /// Stores or flushes since the last recorded fence: a locked or serializing instruction
    /// then orders something (it drains the store buffer and the write-combining buffers
    /// and completes earlier `clwb`/`clflushopt`), so it is recorded as a fence.
    unordered: bool,
    /// Anything recorded since the last fence: otherwise a fence is not worth an entry.
    traced_since_fence: bool,
    /// An interrupt's fence was recorded since the last store or flush: one says it all.
    interrupt_noted: bool,
    /// Virtual page -> physical page, learned from PM accesses, to place flushes (QEMU
    /// reports no access for them).
    pages: HashMap<u64, u64>,
    /// The last (virtual, physical) page pair learned: consecutive stores mostly hit the
    /// same page, and hashing on every store is the tracer's largest cost of its own.
    last_page: (u64, u64),
    /// Flushes of PM-looking addresses whose page was never accessed.
    pub unresolved_flushes: u64,
    pub entries: u64,
    /// The current stack trace of the code at a pc, with `stacks=on` (it may read the
    /// guest's registers and memory, so only callbacks registered for it record entries).
    stack_source: Option<StackSource>,
    /// The write of a string store being merged, with the metadata of its first element.
    string_write: Option<Entry>,
    /// The running thread when it changed since the last entry (`crate::task`).
    task_source: Option<TaskSource>,
    /// Whether the running code is an interrupt handler (`crate::qemu`: the kernel's
    /// preemption count), asked only of a locked or serializing instruction that would be
    /// recorded.
    interrupt_source: Option<InterruptSource>,
}

pub type StackSource = Box<dyn FnMut(u64) -> Vec<u64> + Send>;
pub type TaskSource = Box<dyn FnMut() -> Option<Task> + Send>;
pub type InterruptSource = Box<dyn FnMut() -> bool + Send>;

/// What the QEMU side must do after a hypercall.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    /// Tracing just started: retranslate everything so it gets instrumented.
    FlushTranslations,
}

impl Tracer {
    pub fn new(args: PluginArgs) -> Tracer {
        Tracer {
            args,
            phase: Phase::BeforeStart,
            writer: None,
            unordered: false,
            traced_since_fence: false,
            pages: HashMap::new(),
            last_page: (u64::MAX, u64::MAX),
            unresolved_flushes: 0,
            entries: 0,
            stack_source: None,
            string_write: None,
            task_source: None,
            interrupt_source: None,
            interrupt_noted: false,
        }
    }

    pub fn stacks(&self) -> Stacks {
        self.args.stacks
    }

    /// Installs the stack walker once the vCPU's registers are known (`stacks=on`).
    pub fn set_stack_source(&mut self, source: StackSource) {
        self.stack_source = Some(source);
    }

    /// How the next trace learns the running thread (None: it records no threads); set
    /// before each `start`.
    pub fn set_interrupt_source(&mut self, source: Option<InterruptSource>) {
        self.interrupt_source = source;
    }

    pub fn set_task_source(&mut self, source: Option<TaskSource>) {
        self.task_source = source;
    }

    pub fn tracing(&self) -> bool {
        self.phase == Phase::Tracing
    }

    pub fn reads(&self) -> bool {
        self.args.reads
    }

    pub fn hypercall(&mut self, call: Hypercall, pc: u64) -> Result<Next, String> {
        match (self.phase, call) {
            (Phase::BeforeStart, Hypercall::Start) if !self.args.tracing => Ok(Next::Continue),
            (Phase::BeforeStart, Hypercall::Start) => {
                let flag = |on, flag| if on { flag } else { 0 };
                let header = Header {
                    pm_base: self.args.pm_base,
                    pm_size: self.args.pm_size,
                    blk_size: self.args.blk_size,
                    flags: flag(self.args.reads, Header::FLAG_READS)
                        | flag(self.args.stacks.on(), Header::FLAG_STACKS)
                        | flag(self.task_source.is_some(), Header::FLAG_TASKS),
                };
                if let Some((pm_file, initial)) = &self.args.initial {
                    snapshot(pm_file, &followed(initial))?;
                }
                if let Some((blk_file, initial)) = &self.args.blk_initial {
                    snapshot(blk_file, &followed(initial))?;
                }
                let trace = followed(&self.args.trace);
                let writer = BackgroundWriter::spawn(&trace, &header)
                    .map_err(|e| format!("cannot create trace {}: {e}", trace.display()))?;
                self.writer = Some(writer);
                self.phase = Phase::Tracing;
                self.emit(Op::Hypercall(call), pc);
                Ok(Next::FlushTranslations)
            }
            (Phase::Tracing, Hypercall::Start) => {
                Err("`hypercall start` while already tracing".into())
            }
            (Phase::Tracing, Hypercall::Checkpoint(_)) => {
                self.emit(Op::Hypercall(call), pc);
                Ok(Next::Continue)
            }
            (Phase::Tracing, Hypercall::Success | Hypercall::Fail) => {
                self.emit(Op::Hypercall(call), pc);
                self.finish()?;
                if self.args.repeat {
                    self.phase = Phase::BeforeStart;
                }
                Ok(Next::Continue)
            }
            // Checkpoints outside a traced run are not part of any test.
            _ => Ok(Next::Continue),
        }
    }

    /// The program declared run-time data at these guest-physical runs (its virtual range
    /// translated): one entry for each part inside PM, in PM offsets. Returns how many
    /// bytes lay outside PM (not recorded).
    pub fn volatile(&mut self, pc: u64, runs: &[(u64, u64)]) -> u64 {
        if !self.tracing() {
            return 0;
        }
        let (base, size) = (self.args.pm_base, self.args.pm_size);
        let mut outside = 0;
        for &(paddr, len) in runs {
            let start = paddr.clamp(base, base + size);
            let end = paddr.saturating_add(len).clamp(base, base + size);
            outside += len - (end - start);
            if end > start {
                let call = Hypercall::Volatile {
                    addr: start - base,
                    len: end - start,
                };
                self.emit(Op::Hypercall(call), pc);
            }
        }
        outside
    }

    /// A load or store at guest-physical `paddr`; `data` holds a store's bytes.
    pub fn access(
        &mut self,
        pc: u64,
        vaddr: u64,
        paddr: u64,
        size: u64,
        data: Option<Vec<u8>>,
        store: Store,
    ) {
        let Some(addr) = self.pm_offset(paddr) else {
            return;
        };
        let page = (vaddr >> PAGE_SHIFT, paddr >> PAGE_SHIFT);
        if page != self.last_page {
            self.pages.insert(page.0, page.1);
            self.last_page = page;
        }
        let op = match data {
            Some(data) if store == Store::String => return self.string_store(pc, addr, data),
            Some(data) => {
                self.unordered = true;
                self.interrupt_noted = false;
                Op::Write {
                    addr,
                    data,
                    nt: store == Store::NonTemporal,
                }
            }
            None => Op::Read { addr, size },
        };
        self.emit(op, pc);
    }

    pub fn flush(&mut self, pc: u64, kind: FlushKind, vaddr: u64) {
        let paddr = match self.pages.get(&(vaddr >> PAGE_SHIFT)) {
            Some(page) => page << PAGE_SHIFT | (vaddr & ((1 << PAGE_SHIFT) - 1)),
            None if vaddr.wrapping_sub(DIRECT_MAP_BASE) < DIRECT_MAP_SIZE => {
                vaddr - DIRECT_MAP_BASE
            }
            None => {
                self.unresolved_flushes += 1;
                return;
            }
        };
        if let Some(addr) = self.pm_offset(paddr) {
            self.unordered = true;
            self.interrupt_noted = false;
            self.emit(Op::Flush { kind, addr }, pc);
        }
    }

    /// Merges the elements of a string store into writes of contiguous bytes from one
    /// instruction within one cache line (hardware fast-string stores write at least a
    /// line at a time; QEMU reports bytes). Anything else recorded ends the write.
    fn string_store(&mut self, pc: u64, addr: u64, data: Vec<u8>) {
        if let Some(Entry {
            op:
                Op::Write {
                    addr: start,
                    data: merged,
                    ..
                },
            meta,
        }) = &mut self.string_write
        {
            let end = *start + merged.len() as u64;
            let last = addr + data.len() as u64 - 1;
            if meta.pc == Some(pc) && addr == end && last / LINE == *start / LINE {
                merged.extend_from_slice(&data);
                return;
            }
        }
        self.end_string_write();
        self.unordered = true;
        self.interrupt_noted = false;
        let nt = false;
        self.string_write = self.entry(Op::Write { addr, data, nt }, pc);
    }

    fn end_string_write(&mut self) {
        if let Some(entry) = self.string_write.take() {
            self.send(entry);
        }
    }

    /// sfence/mfence (`explicit`), a locked/serializing instruction, or an `iret`
    /// (`Interrupt`). A locked or serializing instruction of an interrupt handler is
    /// recorded as `Interrupt` too. An interrupt's fence is recorded where it drains
    /// something, but leaves what is unordered for the program's next fence to record:
    /// the crash model does not count it (docs/design/model.md, "Interrupts").
    pub fn fence(&mut self, pc: u64, kind: FenceKind) {
        self.end_string_write();
        let explicit = matches!(kind, FenceKind::Sfence | FenceKind::Mfence);
        let record = if explicit {
            self.traced_since_fence || self.unordered
        } else {
            self.unordered
        };
        if !record {
            return;
        }
        let in_interrupt = kind == FenceKind::Interrupt
            || (!explicit && self.interrupt_source.as_mut().is_some_and(|f| f()));
        if in_interrupt {
            if !self.interrupt_noted {
                self.emit(Op::Fence(FenceKind::Interrupt), pc);
                self.interrupt_noted = true;
            }
            return;
        }
        self.emit(Op::Fence(kind), pc);
        self.traced_since_fence = false;
        self.unordered = false;
    }

    /// A call of a traced function (`persim_abi::calls`), its arguments already translated.
    pub fn call(&mut self, pc: u64, name: &str, args: Vec<Arg>) {
        let name = name.to_owned();
        self.emit(Op::Call { name, args }, pc);
    }

    /// The return of a traced call to `to` (its caller's return address), recorded as an
    /// entry of the caller's: at the `ret`, the stack still holds the callee's frame.
    pub fn ret(&mut self, to: u64, name: &str, value: Arg) {
        let name = name.to_owned();
        if let Some(mut entry) = self.entry(Op::Return { name, value }, to) {
            if entry.meta.stack.first() == Some(&to) {
                entry.meta.stack.remove(0);
            }
            self.end_string_write();
            self.send(entry);
        }
    }

    /// Where a call's argument points: its PM offset if `paddr` (its translation) is in PM.
    pub fn arg(&self, value: u64, paddr: Option<u64>) -> Arg {
        match paddr.and_then(|p| self.pm_offset(p)) {
            Some(offset) => Arg::Pm(offset),
            None => Arg::Value(value),
        }
    }

    /// Block-device entries decoded from the guest's NVMe commands (`crate::nvme`). A
    /// block flush is not a PM fence: the stores and flushes before it stay unordered.
    pub fn block(&mut self, pc: u64, ops: Vec<Op>) {
        for op in ops {
            self.emit(op, pc);
        }
    }

    /// Ends the trace (at success/fail, or when QEMU exits without them).
    pub fn finish(&mut self) -> Result<(), String> {
        self.end_string_write();
        self.phase = Phase::Done;
        match self.writer.take() {
            Some(writer) => writer
                .finish()
                .map_err(|e| format!("writing trace {}: {e}", self.args.trace.display())),
            None => Ok(()),
        }
    }

    fn pm_offset(&self, paddr: u64) -> Option<u64> {
        let offset = paddr.wrapping_sub(self.args.pm_base);
        (offset < self.args.pm_size).then_some(offset)
    }

    fn emit(&mut self, op: Op, pc: u64) {
        if let Some(entry) = self.entry(op, pc) {
            self.end_string_write();
            self.send(entry);
        }
    }

    /// The entry for `op` at `pc`, while a trace is being written.
    fn entry(&mut self, op: Op, pc: u64) -> Option<Entry> {
        self.writer.as_ref()?;
        Some(Entry {
            op,
            meta: Meta {
                pc: Some(pc),
                stack: self.stack_source.as_mut().map_or_else(Vec::new, |f| f(pc)),
                task: self.task_source.as_mut().and_then(|f| f()),
            },
        })
    }

    fn send(&mut self, entry: Entry) {
        if let Some(writer) = &mut self.writer {
            writer.send(entry);
            self.traced_since_fence = true;
            self.entries += 1;
        }
    }
}

/// Where `path` points if it is a symbolic link, else itself. A host that keeps one guest
/// for many recordings (`repeat`) points the trace and initial-image paths at each
/// recording's files before its `start`; the files are written there, not over the links.
pub(crate) fn followed(path: &std::path::Path) -> std::path::PathBuf {
    match std::fs::read_link(path) {
        Ok(target) => path.parent().map_or(target.clone(), |dir| dir.join(target)),
        Err(_) => path.to_path_buf(),
    }
}

/// Copies a backing file (PM or block device) while the (single) vCPU is stopped in the
/// `start` hypercall, so the copy is exactly the state the trace starts from. Written atomically and sparse:
/// a freshly made file system is mostly zeros (64 MiB of PM, 53 KB not zero after mkfs.ext4).
fn snapshot(file: &std::path::Path, to: &std::path::Path) -> Result<(), String> {
    persim_trace::atomic_file::copy_sparse_atomically(file, to)
        .map_err(|e| format!("cannot copy {} to {}: {e}", file.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 1 << 32;

    fn args(dir: &tempfile::TempDir) -> PluginArgs {
        PluginArgs::new(BASE, 1 << 20, dir.path().join("t"))
    }

    fn tracer(dir: &tempfile::TempDir) -> Tracer {
        Tracer::new(args(dir))
    }

    #[test]
    fn entries_carry_the_stack_and_the_header_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Tracer::new(PluginArgs {
            stacks: Stacks::FramePointers,
            ..args(&dir)
        });
        let mut depth = 0;
        t.set_stack_source(Box::new(move |_| {
            depth += 1;
            (0..depth).collect()
        }));
        t.hypercall(Hypercall::Start, 1).unwrap();
        t.access(2, 0, BASE, 1, Some(vec![1]), Store::Cached);
        t.hypercall(Hypercall::Success, 3).unwrap();
        let (header, entries) = persim_trace::read_all(&dir.path().join("t")).unwrap();
        assert_eq!(header.flags, Header::FLAG_STACKS);
        let stacks: Vec<Vec<u64>> = entries.into_iter().map(|e| e.meta.stack).collect();
        assert_eq!(stacks, [vec![0], vec![0, 1], vec![0, 1, 2]]);
    }

    #[test]
    fn an_entry_after_a_thread_switch_names_the_thread_and_the_header_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        let worker = |tid| Task {
            pid: 40,
            tid,
            comm: "worker".into(),
        };
        // The source reports a thread only when it changed: at start, then before the
        // third access.
        let mut switches = vec![Some(worker(41)), None, None, Some(worker(42)), None].into_iter();
        t.set_task_source(Some(Box::new(move || switches.next().flatten())));
        t.hypercall(Hypercall::Start, 1).unwrap();
        for _ in 0..3 {
            t.access(2, 0, BASE, 1, Some(vec![1]), Store::Cached);
        }
        t.hypercall(Hypercall::Success, 3).unwrap();
        let (header, entries) = persim_trace::read_all(&dir.path().join("t")).unwrap();
        assert_eq!(header.flags, Header::FLAG_TASKS);
        let tasks: Vec<Option<Task>> = entries.into_iter().map(|e| e.meta.task).collect();
        assert_eq!(
            tasks,
            [Some(worker(41)), None, None, Some(worker(42)), None]
        );
    }

    #[test]
    fn with_tracing_off_start_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Tracer::new(PluginArgs {
            tracing: false,
            ..args(&dir)
        });
        assert_eq!(t.hypercall(Hypercall::Start, 1), Ok(Next::Continue));
        assert!(!t.tracing());
        t.access(2, 0, BASE, 1, Some(vec![1]), Store::Cached);
        t.hypercall(Hypercall::Success, 3).unwrap();
        t.finish().unwrap();
        assert!(!dir.path().join("t").exists());
        assert_eq!(t.entries, 0);
    }

    #[test]
    fn start_snapshots_the_pm_file() {
        let dir = tempfile::tempdir().unwrap();
        let pm = dir.path().join("pm");
        std::fs::write(&pm, b"formatted file system").unwrap();
        let mut t = Tracer::new(PluginArgs {
            initial: Some((pm.clone(), dir.path().join("initial"))),
            ..args(&dir)
        });
        t.hypercall(Hypercall::Start, 0).unwrap();
        std::fs::write(&pm, b"changed after start").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("initial")).unwrap(),
            b"formatted file system"
        );
    }

    fn ops(dir: &tempfile::TempDir) -> Vec<Op> {
        let (header, entries) = persim_trace::read_all(&dir.path().join("t")).unwrap();
        assert_eq!((header.pm_base, header.pm_size), (BASE, 1 << 20));
        entries.into_iter().map(|e| e.op).collect()
    }

    #[test]
    fn declared_run_time_data_is_recorded_in_pm_offsets_and_only_inside_pm() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        assert_eq!(t.volatile(1, &[(BASE, 64)]), 0, "not tracing yet: nothing");
        t.hypercall(Hypercall::Start, 2).unwrap();
        // a run inside PM, one straddling its start, one straddling its end, one in DRAM
        let runs = [
            (BASE + 0x1000, 0x80),
            (BASE - 0x10, 0x50),
            (BASE + (1 << 20) - 0x40, 0x100),
            (0x10_0000, 0x1000),
        ];
        assert_eq!(t.volatile(3, &runs), 0x10 + 0xc0 + 0x1000);
        t.hypercall(Hypercall::Success, 4).unwrap();
        let volatile = |addr, len| Op::Hypercall(Hypercall::Volatile { addr, len });
        assert_eq!(
            ops(&dir),
            [
                Op::Hypercall(Hypercall::Start),
                volatile(0x1000, 0x80),
                volatile(0, 0x40),
                volatile((1 << 20) - 0x40, 0x40),
                Op::Hypercall(Hypercall::Success),
            ]
        );
    }

    #[test]
    fn records_only_pm_accesses_between_start_and_success() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        t.access(1, 0x7000, BASE + 8, 1, Some(vec![1]), Store::Cached);
        assert_eq!(
            t.hypercall(Hypercall::Start, 2),
            Ok(Next::FlushTranslations)
        );
        t.access(
            3,
            0x7000,
            BASE + 0x40,
            2,
            Some(vec![0xab, 0xcd]),
            Store::Cached,
        );
        t.access(4, 0x9000, 0x1000, 1, Some(vec![9]), Store::Cached); // DRAM
        t.access(5, 0x7008, BASE + 0x48, 8, None, Store::Cached); // loads only with reads=on
        t.hypercall(Hypercall::Success, 6).unwrap();
        t.access(7, 0x7000, BASE, 1, Some(vec![2]), Store::Cached);
        assert_eq!(
            ops(&dir),
            [
                Op::Hypercall(Hypercall::Start),
                Op::Write {
                    addr: 0x40,
                    data: vec![0xab, 0xcd],
                    nt: false
                },
                Op::Read {
                    addr: 0x48,
                    size: 8
                },
                Op::Hypercall(Hypercall::Success),
            ]
        );
    }

    #[test]
    fn with_repeat_each_start_begins_a_new_trace() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Tracer::new(PluginArgs {
            repeat: true,
            ..args(&dir)
        });
        for addr in [0x40, 0x80] {
            assert_eq!(
                t.hypercall(Hypercall::Start, 1),
                Ok(Next::FlushTranslations)
            );
            t.access(2, 0x7000, BASE + addr, 8, None, Store::Cached);
            t.hypercall(Hypercall::Success, 3).unwrap();
            t.access(4, 0x7000, BASE, 8, None, Store::Cached); // between traces
            let reads: Vec<Op> = ops(&dir)
                .into_iter()
                .filter(|op| matches!(op, Op::Read { .. }))
                .collect();
            assert_eq!(reads, [Op::Read { addr, size: 8 }]);
        }
        // a link at the trace path is followed anew at each start
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        let link = dir.path().join("link");
        let mut linked = Tracer::new(PluginArgs {
            repeat: true,
            trace: link.clone(),
            ..args(&dir)
        });
        for target in [&first, &second] {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).unwrap();
            linked.hypercall(Hypercall::Start, 1).unwrap();
            linked.hypercall(Hypercall::Success, 3).unwrap();
            assert!(target.is_file() && link.is_symlink());
        }
        // without repeat, a second start is ignored and the first trace stays
        let mut once = tracer(&dir);
        once.hypercall(Hypercall::Start, 1).unwrap();
        once.hypercall(Hypercall::Success, 2).unwrap();
        assert_eq!(once.hypercall(Hypercall::Start, 3), Ok(Next::Continue));
        assert!(!once.tracing());
    }

    #[test]
    fn flushes_are_placed_through_learned_pages_or_the_direct_map() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        t.hypercall(Hypercall::Start, 0).unwrap();
        t.access(
            1,
            0x7fff_0000_1010,
            BASE + 0x3010,
            8,
            Some(vec![0; 8]),
            Store::NonTemporal,
        );
        t.flush(2, FlushKind::Clwb, 0x7fff_0000_1040);
        t.flush(3, FlushKind::Clflushopt, DIRECT_MAP_BASE + BASE + 0x80);
        t.flush(4, FlushKind::Clflush, 0x5555_0000_0000);
        t.hypercall(Hypercall::Success, 5).unwrap();
        assert_eq!(t.unresolved_flushes, 1);
        let got = ops(&dir);
        assert_eq!(
            got[2],
            Op::Flush {
                kind: FlushKind::Clwb,
                addr: 0x3040
            }
        );
        assert_eq!(
            got[3],
            Op::Flush {
                kind: FlushKind::Clflushopt,
                addr: 0x80
            }
        );
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn a_call_records_pm_arguments_as_offsets_and_others_as_values() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        t.hypercall(Hypercall::Start, 0).unwrap();
        let args = vec![
            t.arg(0x7f00_0000_1010, Some(BASE + 0x1010)),
            t.arg(0x7ffc_0000_0008, Some(0x20_0008)),
            t.arg(40, None),
        ];
        t.call(0x7f00_1234_5000, "pmem_persist", args);
        t.hypercall(Hypercall::Success, 5).unwrap();
        assert_eq!(
            ops(&dir)[1],
            Op::Call {
                name: "pmem_persist".into(),
                args: vec![
                    Arg::Pm(0x1010),
                    Arg::Value(0x7ffc_0000_0008),
                    Arg::Value(40)
                ]
            }
        );
    }

    #[test]
    fn a_return_is_the_callers_entry_without_the_callees_frame() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        // at the ret, the shadow stack's innermost frame is the one it returns through
        t.set_stack_source(Box::new(|_| vec![0x5555_0234, 0x5555_0100]));
        t.hypercall(Hypercall::Start, 0).unwrap();
        let value = t.arg(0x7f00_0000_1010, Some(BASE + 0x1010));
        t.ret(0x5555_0234, "pmemobj_tx_alloc", value);
        t.hypercall(Hypercall::Success, 5).unwrap();
        let (_, entries) = persim_trace::read_all(&dir.path().join("t")).unwrap();
        assert_eq!(
            entries[1].op,
            Op::Return {
                name: "pmemobj_tx_alloc".into(),
                value: Arg::Pm(0x1010)
            }
        );
        assert_eq!(entries[1].meta.pc, Some(0x5555_0234));
        assert_eq!(entries[1].meta.stack, [0x5555_0100]);
    }

    #[test]
    fn string_store_elements_merge_within_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        t.hypercall(Hypercall::Start, 0).unwrap();
        // rep stosb at pc 1 over 0x3e..0x81, then rep movsb at pc 2 that jumps backwards.
        for offset in 0x3e..0x81u64 {
            t.access(
                1,
                0,
                BASE + offset,
                1,
                Some(vec![offset as u8]),
                Store::String,
            );
        }
        t.access(2, 0, BASE + 0x10, 1, Some(vec![0xa]), Store::String);
        t.access(2, 0, BASE + 0x11, 1, Some(vec![0xb]), Store::String);
        t.access(2, 0, BASE + 0x8, 1, Some(vec![0xc]), Store::String);
        t.fence(3, FenceKind::Sfence);
        t.access(4, 0, BASE + 0x12, 1, Some(vec![0xd]), Store::String);
        t.hypercall(Hypercall::Success, 5).unwrap();
        let write = |addr: u64, data: Vec<u8>| Op::Write {
            addr,
            data,
            nt: false,
        };
        assert_eq!(
            ops(&dir)[1..],
            [
                write(0x3e, vec![0x3e, 0x3f]),
                write(0x40, (0x40..0x80).collect()),
                write(0x80, vec![0x80]),
                write(0x10, vec![0xa, 0xb]),
                write(0x8, vec![0xc]),
                Op::Fence(FenceKind::Sfence),
                write(0x12, vec![0xd]),
                Op::Hypercall(Hypercall::Success),
            ]
        );
    }

    #[test]
    fn fences_only_when_something_is_pending() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        t.hypercall(Hypercall::Start, 0).unwrap();
        t.fence(1, FenceKind::Sfence); // after the start entry: recorded
        t.fence(2, FenceKind::Sfence); // nothing since: dropped
        t.fence(3, FenceKind::Locked); // nothing to order: dropped
        t.access(4, 0, BASE, 1, Some(vec![1]), Store::Cached);
        t.fence(5, FenceKind::Locked); // drains the store buffer: recorded
        t.fence(6, FenceKind::Mfence); // nothing since: dropped
        t.access(7, 0, BASE, 8, Some(vec![2; 8]), Store::NonTemporal);
        t.fence(8, FenceKind::Serializing);
        t.fence(9, FenceKind::Locked);
        t.access(10, 0, BASE, 0, None, Store::Cached); // a load orders nothing
        t.fence(11, FenceKind::Locked);
        t.hypercall(Hypercall::Fail, 12).unwrap();
        let fences: Vec<Op> = ops(&dir)
            .into_iter()
            .filter(|op| matches!(op, Op::Fence(_)))
            .collect();
        assert_eq!(
            fences,
            [
                Op::Fence(FenceKind::Sfence),
                Op::Fence(FenceKind::Locked),
                Op::Fence(FenceKind::Serializing)
            ]
        );
    }

    #[test]
    fn a_locked_instruction_after_a_flush_is_a_fence() {
        // clwb is ordered by locked instructions: the flushed line is durable after it,
        // and a trace without the fence would keep it pending (images real hardware
        // cannot leave).
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        t.hypercall(Hypercall::Start, 0).unwrap();
        t.access(1, 0, BASE, 1, Some(vec![1]), Store::Cached);
        t.fence(2, FenceKind::Sfence);
        t.flush(3, FlushKind::Clwb, DIRECT_MAP_BASE + BASE);
        t.fence(4, FenceKind::Locked);
        t.hypercall(Hypercall::Success, 5).unwrap();
        let ops = ops(&dir);
        let flush = ops
            .iter()
            .position(|op| matches!(op, Op::Flush { .. }))
            .unwrap();
        assert_eq!(ops[flush + 1], Op::Fence(FenceKind::Locked), "{ops:?}");
    }

    /// An interrupt that lands between a program's NT stores and its sfence: recorded once,
    /// as an interrupt, and the sfence is still recorded (it orders what the interrupt's
    /// fence does not count for).
    #[test]
    fn an_interrupt_leaves_the_programs_fence_to_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tracer(&dir);
        let in_handler = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handler = in_handler.clone();
        t.set_interrupt_source(Some(Box::new(move || {
            handler.load(std::sync::atomic::Ordering::Relaxed)
        })));
        t.hypercall(Hypercall::Start, 0).unwrap();
        t.access(1, 0, BASE, 8, Some(vec![2; 8]), Store::NonTemporal);
        in_handler.store(true, std::sync::atomic::Ordering::Relaxed);
        t.fence(2, FenceKind::Locked);
        t.fence(3, FenceKind::Locked);
        in_handler.store(false, std::sync::atomic::Ordering::Relaxed);
        t.fence(4, FenceKind::Interrupt); // the iret
        t.access(5, 0, BASE + 8, 8, Some(vec![3; 8]), Store::NonTemporal);
        t.fence(6, FenceKind::Sfence);
        t.hypercall(Hypercall::Success, 7).unwrap();
        let fences: Vec<Op> = ops(&dir)
            .into_iter()
            .filter(|op| matches!(op, Op::Fence(_)))
            .collect();
        assert_eq!(
            fences,
            [
                Op::Fence(FenceKind::Interrupt),
                Op::Fence(FenceKind::Sfence)
            ]
        );
    }
}
