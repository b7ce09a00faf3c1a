//! The entries of a trace: what the tracer records and the crash model replays.

/// How a cache line was flushed. The crash model treats all kinds alike; the kind is kept
/// because efficiency analysis and reports care which instruction was used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushKind {
    Clwb,
    Clflushopt,
    Clflush,
}

/// What ordered the stores. `Locked` and `Serializing` are recorded by the tracer only while
/// non-temporal stores are pending, because they drain the same buffers as `sfence`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceKind {
    Sfence,
    Mfence,
    Locked,
    Serializing,
    /// A locked or serializing instruction of an interrupt (its handler, or the `iret`
    /// that returns from it). It drains the buffers too, but where an interrupt lands is
    /// no choice of the program, so the crash model does not count it (docs/design/model.md,
    /// "Interrupts").
    Interrupt,
}

impl FenceKind {
    /// The word the text format and reports name the kind by.
    pub fn name(self) -> &'static str {
        match self {
            FenceKind::Sfence => "sfence",
            FenceKind::Mfence => "mfence",
            FenceKind::Locked => "locked",
            FenceKind::Serializing => "serializing",
            FenceKind::Interrupt => "interrupt",
        }
    }
}

/// A call from the guest to Persim that marks the phases of a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hypercall {
    Start,
    Checkpoint(u64),
    Success,
    Fail,
    /// The program under test declares `len` bytes of PM at `addr` (PM offset) run-time
    /// data, not part of its persistent state, from here to the end of the trace.
    Volatile {
        addr: u64,
        len: u64,
    },
}

/// One traced operation. PM addresses are byte offsets into the PM region, block offsets
/// are byte offsets into the block device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A cached store (`nt == false`) or a non-temporal store (`nt == true`) of 1..=64 bytes.
    Write {
        addr: u64,
        data: Vec<u8>,
        nt: bool,
    },
    Read {
        addr: u64,
        size: u64,
    },
    /// `addr` is any byte of the flushed line.
    Flush {
        kind: FlushKind,
        addr: u64,
    },
    Fence(FenceKind),
    Hypercall(Hypercall),
    /// A block-device write; offset and length are multiples of 512.
    BlkWrite {
        offset: u64,
        data: Vec<u8>,
    },
    BlkRead {
        offset: u64,
        size: u64,
    },
    BlkFlush,
    /// A call of a named function of the traced program or its shared libraries
    /// (`--trace-calls`, docs/design/tracer.md "Library calls"), recorded at its first instruction
    /// with its argument registers (rdi, rsi, rdx, rcx, r8, r9, as many as the function
    /// takes).
    Call {
        name: String,
        args: Vec<Arg>,
    },
    /// The return of a traced call (`--trace-calls`): the function's return value (rax;
    /// a returned `PMEMoid`'s object address), recorded at the instruction it returns to,
    /// so the entry's pc is the caller's return address and its stack the caller's.
    Return {
        name: String,
        value: Arg,
    },
}

/// An argument of a recorded call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// The register's value (a size, a flag, or an address outside PM).
    Value(u64),
    /// An address inside PM, as a PM offset (the traced program's page tables translated it).
    Pm(u64),
}

/// The guest thread that was running: its process (thread group) id, its thread id and
/// its name (the kernel's `comm`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Task {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

/// Optional per-entry metadata: where in the traced program the entry came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Meta {
    pub pc: Option<u64>,
    /// Return addresses, innermost first.
    pub stack: Vec<u64>,
    /// Set on the first entry after the running thread changed: this entry and all that
    /// follow, up to the next entry with a task, were made by it (docs/reference/trace-format.md).
    pub task: Option<Task>,
}

impl Meta {
    pub fn is_empty(&self) -> bool {
        self.pc.is_none() && self.stack.is_empty() && self.task.is_none()
    }
}

/// An operation with its metadata.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub op: Op,
    pub meta: Meta,
}

/// Largest store the tracer records: one cache line (AVX-512 stores).
pub const MAX_WRITE_LEN: usize = 64;
/// Block-device writes are made of blocks of this many bytes.
pub const BLOCK_SIZE: u64 = 512;
/// Largest block write a trace may hold. Bounds what a decoder allocates for one entry.
pub const MAX_BLK_WRITE_LEN: usize = 16 << 20;
/// Deepest stack trace an entry may carry. Bounds what a decoder allocates for one entry.
pub const MAX_STACK_DEPTH: usize = 256;
/// Longest task name a trace may hold, in bytes (Linux's are at most 15).
pub const MAX_COMM_LEN: usize = 64;
/// Longest function name a call entry may hold, in bytes.
pub const MAX_CALL_NAME_LEN: usize = 128;
/// Most arguments a call entry holds: the six integer argument registers of x86-64.
pub const MAX_CALL_ARGS: usize = 6;

/// A call's or return's function name: what both encodings can delimit.
fn valid_function_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CALL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'#' && b != b'@')
}

impl Entry {
    /// Checks the limits every encoding relies on; the error says which one is broken.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match &self.op {
            Op::Write { data, .. } if data.is_empty() || data.len() > MAX_WRITE_LEN => {
                Err(format!(
                    "a write stores 1..={MAX_WRITE_LEN} bytes, not {}",
                    data.len()
                ))
            }
            Op::BlkWrite { offset, data } => {
                if offset % BLOCK_SIZE != 0 {
                    Err(format!(
                        "block write offset {offset:#x} is not a multiple of {BLOCK_SIZE}"
                    ))
                } else if data.is_empty()
                    || !(data.len() as u64).is_multiple_of(BLOCK_SIZE)
                    || data.len() > MAX_BLK_WRITE_LEN
                {
                    Err(format!(
                        "block write length {} is not a non-zero multiple of {BLOCK_SIZE} \
                         up to {MAX_BLK_WRITE_LEN}",
                        data.len()
                    ))
                } else {
                    Ok(())
                }
            }
            Op::Call { name, .. } | Op::Return { name, .. } if !valid_function_name(name) => {
                Err(format!(
                    "a called function's name is 1..={MAX_CALL_NAME_LEN} printable ASCII \
                     characters other than `#` and `@`, not {name:?}"
                ))
            }
            Op::Call { args, .. } if args.len() > MAX_CALL_ARGS => Err(format!(
                "a call has at most {MAX_CALL_ARGS} arguments, not {}",
                args.len()
            )),
            _ => Ok(()),
        }?;
        if self.meta.stack.len() > MAX_STACK_DEPTH {
            return Err(format!(
                "a stack trace of {} frames is deeper than {MAX_STACK_DEPTH}",
                self.meta.stack.len()
            ));
        }
        if let Some(task) = &self.meta.task {
            if task.comm.len() > MAX_COMM_LEN {
                return Err(format!(
                    "a task name of {} bytes is longer than {MAX_COMM_LEN}",
                    task.comm.len()
                ));
            }
        }
        Ok(())
    }
}

impl From<Op> for Entry {
    fn from(op: Op) -> Self {
        Entry {
            op,
            meta: Meta::default(),
        }
    }
}

/// Facts about the traced machine, stored in a binary trace's header and in the text
/// form's `# persim-trace` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Guest-physical address of the PM region (0 when unknown, e.g. hand-written traces).
    pub pm_base: u64,
    /// Size of the PM region in bytes (0 when unknown).
    pub pm_size: u64,
    /// Size of the block device in bytes (0 when there is none).
    pub blk_size: u64,
    pub flags: u64,
}

impl Header {
    /// The trace holds load entries.
    pub const FLAG_READS: u64 = 1 << 0;
    /// Entries carry stack traces.
    pub const FLAG_STACKS: u64 = 1 << 1;
    /// Entries record which thread made them (`Meta::task`).
    pub const FLAG_TASKS: u64 = 1 << 2;
}
