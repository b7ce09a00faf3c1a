//! The counting mode's glue for kernel `rep movs`/`rep stos` (`crate::string_stores`): an
//! instruction callback at each entry and an inline add per stored element, instead of a
//! memory callback per element (44 % of the callbacks, docs/results/performance.md).

use super::{GuestMemory, RawRegister, RegisterHandle, PM_BASE, PM_SIZE, PM_STORED};
use crate::string_stores::Execution;
use qemu_plugin::sys::{
    qemu_plugin_cb_flags, qemu_plugin_insn, qemu_plugin_mem_rw, qemu_plugin_op,
    qemu_plugin_scoreboard, qemu_plugin_u64,
};
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

/// The registers an execution starts from: rdi, rcx, eflags, cr3.
static REGISTERS: OnceLock<[RegisterHandle; 4]> = OnceLock::new();
/// Bytes stored by the accounted instructions, per vCPU (u64 each), added inline.
static STORED: OnceLock<Board> = OnceLock::new();
/// Per vCPU, its last execution, not yet settled.
static PENDING: Mutex<Vec<Option<Execution>>> = Mutex::new(Vec::new());

struct Board(*mut qemu_plugin_scoreboard);

// SAFETY: QEMU's scoreboard is made for use from every vCPU thread.
unsafe impl Send for Board {}
unsafe impl Sync for Board {}

impl Board {
    fn entry(&self) -> qemu_plugin_u64 {
        qemu_plugin_u64 {
            score: self.0,
            offset: 0,
        }
    }

    fn get(&self, vcpu: u32) -> u64 {
        // SAFETY: an entry of this live scoreboard; QEMU sizes it for every vCPU.
        unsafe { qemu_plugin::sys::qemu_plugin_u64_get(self.entry(), vcpu) }
    }
}

/// This vCPU thread's register readers and page-table reader (made on first use).
struct Local {
    rdi: RawRegister,
    rcx: RawRegister,
    eflags: RawRegister,
    cr3: RawRegister,
    memory: GuestMemory,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// At a vCPU's initialisation (counting mode): finds the registers, once. Without them
/// string stores keep a memory callback per element.
pub fn init() -> Result<(), &'static str> {
    if REGISTERS.get().is_some() {
        return Ok(());
    }
    let [Some(rdi), Some(rcx), Some(eflags), Some(cr3)] =
        RawRegister::find(["rdi", "rcx", "eflags", "cr3"])
    else {
        return Err("QEMU does not expose rdi, rcx, eflags and cr3: string stores cost a callback per element");
    };
    // SAFETY: plain allocation, kept for the life of the plugin.
    let board = unsafe { qemu_plugin::sys::qemu_plugin_scoreboard_new(8) };
    let _ = STORED.set(Board(board));
    let _ = REGISTERS.set([rdi, rcx, eflags, cr3]);
    Ok(())
}

/// Instruments a kernel rep string store of `size`-byte elements, if the registers are
/// known (else the caller registers a memory callback).
pub fn instrument(insn: *mut qemu_plugin_insn, size: u64) -> bool {
    let Some(board) = STORED.get() else {
        return false;
    };
    // SAFETY: the instruction handle of the running translation callback; the size is
    // passed as the callback's data, not as a pointer.
    unsafe {
        qemu_plugin::sys::qemu_plugin_register_vcpu_insn_exec_cb(
            insn,
            Some(on_entry),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
            size as *mut std::ffi::c_void,
        );
        qemu_plugin::sys::qemu_plugin_register_vcpu_mem_inline_per_vcpu(
            insn,
            qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_W,
            qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
            board.entry(),
            size,
        );
    }
    true
}

/// An entry into the instruction: settles this vCPU's previous execution and starts one.
unsafe extern "C" fn on_entry(vcpu: std::ffi::c_uint, data: *mut std::ffi::c_void) {
    const DIRECTION_FLAG: u64 = 1 << 10;
    let (Some(board), Some(&handles)) = (STORED.get(), REGISTERS.get()) else {
        return;
    };
    let stored = board.get(vcpu);
    LOCAL.with_borrow_mut(|local| {
        let local = local.get_or_insert_with(|| {
            let [rdi, rcx, eflags, cr3] = handles.map(RawRegister::new);
            Local {
                rdi,
                rcx,
                eflags,
                cr3,
                memory: GuestMemory::new(),
            }
        });
        let down = local.eflags.read() & DIRECTION_FLAG != 0;
        let (rdi, rcx, cr3) = (local.rdi.read(), local.rcx.read(), local.cr3.read());
        let execution = Execution::new(&mut local.memory, cr3, rdi, rcx, data as u64, down, stored);
        let previous = {
            let mut pending = PENDING.lock().unwrap_or_else(|p| p.into_inner());
            let slot = vcpu as usize;
            if pending.len() <= slot {
                pending.resize_with(slot + 1, || None);
            }
            pending[slot].replace(execution)
        };
        if let Some(previous) = previous {
            settle(previous, stored, &mut local.memory);
        }
    });
}

/// Adds an execution's PM bytes, given its vCPU's stored bytes now.
fn settle(mut execution: Execution, stored: u64, memory: &mut GuestMemory) {
    let (base, size) = (
        PM_BASE.load(Ordering::Relaxed),
        PM_SIZE.load(Ordering::Relaxed),
    );
    let bytes = stored - execution.stored_before;
    PM_STORED.fetch_add(
        execution.pm_bytes(memory, bytes, base, size),
        Ordering::Relaxed,
    );
}

/// At `start`: executions before it are not counted.
pub fn forget() {
    PENDING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter_mut()
        .for_each(|e| *e = None);
}

/// At `success`/`fail`: settles every vCPU's last execution (another vCPU's is counted as
/// far as it got).
pub fn settle_all() {
    let Some(board) = STORED.get() else {
        return;
    };
    let mut memory = GuestMemory::new();
    let pending: Vec<_> = PENDING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter_mut()
        .map(Option::take)
        .collect();
    for (vcpu, execution) in pending.into_iter().enumerate() {
        if let Some(execution) = execution {
            settle(execution, board.get(vcpu as u32), &mut memory);
        }
    }
}
