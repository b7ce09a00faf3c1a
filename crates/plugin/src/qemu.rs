//! The plugin's interface to QEMU: installation, translation-time instrumentation and
//! the execution-time callbacks that feed the [`Tracer`].

use crate::calls::{self, CallTable, PendingReturns};
use crate::counter::{maps_user_pm, Counter, CounterNext};
use crate::decode::{
    classify, rep_string_store, store_target, Class, MemOperand, Segment, StoreTarget,
};
use crate::hypercall::{self, Call};
use crate::nvme::NvmeDecoder;
use crate::physical::{self, is_user_table, PhysMemory};
use crate::stack::{self, ShadowStacks, StackKey};
use crate::task::{TaskLayout, TaskWatch, TASK_SEARCHED};
use crate::tracer::{Next, Store, Tracer};
use persim_abi::calls::ReturnRole;
use persim_abi::machine::{DIRECT_MAP_BASE, DIRECT_MAP_SIZE};
use persim_abi::{Counts, PluginArgs, Stacks};
use persim_trace::{Arg, FenceKind, FlushKind, Hypercall};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::sys::{
    qemu_plugin_read_memory_vaddr, qemu_plugin_read_register, qemu_plugin_reg_descriptor,
    qemu_plugin_register, qemu_plugin_tb, GArray, GByteArray,
};
use qemu_plugin::{
    qemu_plugin_get_registers, qemu_plugin_outs, qemu_plugin_register_atexit_cb,
    qemu_plugin_register_vcpu_tb_trans_cb, CallbackFlags, Info, MemRW, MemValue, MemoryInfo,
    PluginId, RegisterDescriptor, TranslationBlock, VCPUIndex,
};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

mod block_profile;
mod rep_stores;

/// The PM range, readable without the lock: most stores go to DRAM and are rejected here.
static PM_BASE: AtomicU64 = AtomicU64::new(0);
static PM_SIZE: AtomicU64 = AtomicU64::new(0);
/// Counting mode: `every_store=on`.
static EVERY_STORE: AtomicBool = AtomicBool::new(false);
/// Counting mode: `serial=on`, no per-vCPU inline operations.
static SERIAL: AtomicBool = AtomicBool::new(false);
/// Counting mode: `profile=on`, instructions per kernel block too.
static PROFILE: AtomicBool = AtomicBool::new(false);
/// Counting mode: the kernel has mapped PM into user space (never cleared: a mapping
/// outlives a counted run).
static USER_PM_MAPPED: AtomicBool = AtomicBool::new(false);
static STATE: OnceLock<Mutex<State>> = OnceLock::new();
/// The running guest thread, from the stores that switch it (`crate::task`).
static TASKS: TaskWatch = TaskWatch::new();
/// The registers the shadow call stacks read (`stacks=shadow`), once known.
static SHADOW_REGISTERS: OnceLock<ShadowRegisters> = OnceLock::new();
/// A traced call's return is awaited: until one is, a user `ret` costs no lock.
static AWAITING_RETURN: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The shadow call stacks, apart from the state and per vCPU thread without a lock:
    /// `call` and `ret` are far more frequent than PM accesses (the lock was most of their
    /// cost). With one vCPU there is one.
    static SHADOW: RefCell<Option<Shadow>> = const { RefCell::new(None) };
}

/// Register handles: QEMU's are indices, the same for every vCPU.
#[derive(Clone, Copy)]
struct ShadowRegisters {
    rsp: RegisterHandle,
    cr3: Option<RegisterHandle>,
    fs_base: Option<RegisterHandle>,
}

struct State {
    id: PluginId,
    tracer: Tracer,
    /// In counting mode (`count=on`).
    counter: Option<Counter>,
    registers: Registers,
    /// With an NVMe namespace (`blk_size`): its commands, from the driver's register
    /// stores, and the guest memory they name.
    nvme: Option<(NvmeDecoder, GuestMemory)>,
    /// With `calls=PATH`: the functions whose calls are recorded, the guest memory their
    /// code and page tables are read through, and the calls whose return is awaited.
    calls: Option<(CallTable, GuestMemory, PendingReturns)>,
}

/// The name of the NVMe controller's register region in QEMU's memory map.
const NVME_REGISTERS: &str = "nvme";
/// PCI places a BAR at a multiple of its (power-of-two) size, and QEMU's NVMe BAR holds its
/// registers and doorbells (< 8 KiB with 64 queue pairs) at its start: the low bits of a
/// physical address are the register offset.
const NVME_REGISTER_SPAN: u64 = 0x2000;
/// The namespace's logical block size, as the VM configures it (`logical_block_size`).
const NVME_LBA_SIZE: u64 = 512;

/// Handles of the registers the plugin reads: the 16 GPRs in encoding order, fs/gs bases,
/// the kernel's gs base while user code runs (`k_gs_base`: where the per-CPU data is at a
/// `hypercall start`), cr3 (the page tables a `hypercall volatile` range is translated
/// through).
#[derive(Default)]
struct Registers {
    gprs: Vec<Option<RegisterDescriptor<'static>>>,
    fs_base: Option<RegisterDescriptor<'static>>,
    gs_base: Option<RegisterDescriptor<'static>>,
    k_gs_base: Option<RegisterDescriptor<'static>>,
    cr3: Option<RegisterDescriptor<'static>>,
}

const GPR_NAMES: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

impl Registers {
    fn gpr(&self, n: u8) -> u64 {
        self.gprs
            .get(usize::from(n))
            .and_then(Option::as_ref)
            .map_or(0, read_u64)
    }

    fn segment_base(&self, segment: Segment) -> u64 {
        let reg = match segment {
            Segment::Fs => &self.fs_base,
            Segment::Gs => &self.gs_base,
        };
        reg.as_ref().map_or(0, read_u64)
    }
}

struct Shadow {
    stacks: ShadowStacks,
    rsp: RawRegister,
    cr3: Option<RawRegister>,
    fs_base: Option<RawRegister>,
    /// The user stack of the running thread, read once after the kernel last ran: only
    /// the kernel switches address spaces and threads, and reading cr3 and fs_base on each
    /// user call and return was a tenth of a traced shell's time (docs/results/performance.md).
    user: Option<StackKey>,
    /// Reads the iret frame at each `iret` (one buffer for all of them).
    memory: GuestMemory,
}

impl Shadow {
    fn new(registers: ShadowRegisters) -> Shadow {
        Shadow {
            stacks: ShadowStacks::default(),
            rsp: RawRegister::new(registers.rsp),
            cr3: registers.cr3.map(RawRegister::new),
            fs_base: registers.fs_base.map(RawRegister::new),
            user: None,
            memory: GuestMemory::new(),
        }
    }

    /// The stack a slot of a user stack is on (see [`StackKey`]); kernel stacks are named
    /// by the slot alone.
    fn key(&mut self, slot: u64) -> StackKey {
        if is_kernel(slot) {
            self.user = None;
            return StackKey::kernel(slot);
        }
        let read = |reg: &mut Option<RawRegister>| reg.as_mut().map_or(0, RawRegister::read);
        *self.user.get_or_insert_with(|| StackKey::User {
            cr3: read(&mut self.cr3),
            fs_base: read(&mut self.fs_base),
        })
    }

    /// Before an `iret`: back to kernel code, the stack it returns to is the running one
    /// again (`ShadowStacks::resume_kernel`); the iret frame at rsp holds the code segment
    /// at +8 and the stack pointer at +24.
    fn iret(&mut self) {
        let rsp = self.rsp.read();
        let (mut cs, mut target) = ([0u8; 8], [0u8; 8]);
        if self.memory.read_vaddr(rsp + 8, &mut cs)
            && self.memory.read_vaddr(rsp + 24, &mut target)
            && u64::from_le_bytes(cs) & 3 == 0
        {
            self.stacks.resume_kernel(u64::from_le_bytes(target));
        }
    }

    /// The stack trace of the code at `pc`. Kernel code's is the shadow stack as the last
    /// call or return left it, read without registers, which is what lets kernel code be
    /// instrumented without them (docs/design/tracer.md, "Stack traces").
    fn current(&mut self, pc: u64) -> Vec<u64> {
        if is_kernel(pc) {
            return self.stacks.latest_kernel();
        }
        let rsp = self.rsp.read();
        let key = self.key(rsp);
        self.stacks.current(key, rsp)
    }
}

/// Runs `f` on this vCPU thread's shadow stacks (made on first use).
fn with_shadow<R>(f: impl FnOnce(&mut Shadow) -> R) -> Option<R> {
    SHADOW.with_borrow_mut(|shadow| {
        if shadow.is_none() {
            *shadow = Some(Shadow::new(*SHADOW_REGISTERS.get()?));
        }
        shadow.as_mut().map(f)
    })
}

/// What the memory callback of one instruction needs: leaked once per translation (as
/// the crate's boxed closures are), its address given to QEMU as the callback's data.
struct AccessSite {
    pc: u64,
    store: Store,
    stack: StackOp,
    /// Whether the tracer records loads (`--reads`).
    loads: bool,
}

/// What an instruction does to the shadow stack (`stacks=shadow`).
#[derive(Clone, Copy)]
enum StackOp {
    None,
    /// A `call` returning to this address: its push names the new frame's slot.
    Call(u64),
    /// A `ret`: its pop names the slot of the frame it returns through.
    Ret,
}

/// Every traced access: the shadow stack's push or pop, then the tracer's check of the
/// address. Registered through the C API: the crate's closures cost a tenth of this path,
/// and one callback for both took about 5 % off the CPU time of runs with shadow stacks
/// (docs/results/performance.md).
unsafe extern "C" fn on_access_raw(
    _vcpu: std::ffi::c_uint,
    info: qemu_plugin::sys::qemu_plugin_meminfo_t,
    vaddr: u64,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: `data` is the leaked `AccessSite` of this instruction's translation.
    let site = unsafe { &*(data as *const AccessSite) };
    let info = MemoryInfo::from(info);
    let store = info.is_store();
    // The push of a call or the pop of a return gives the slot without reading rsp; a
    // memory-indirect call's load of its target is not the frame's.
    match site.stack {
        StackOp::Call(ret) if store => {
            with_shadow(|s| {
                let key = s.key(vaddr);
                s.stacks.call(key, vaddr + 8, ret)
            });
        }
        StackOp::Ret => {
            let target = || match info.value() {
                MemValue::U64(target) => target,
                _ => 0,
            };
            with_shadow(|s| {
                let key = s.key(vaddr);
                s.stacks.ret(key, vaddr, target)
            });
        }
        _ => {}
    }
    if store {
        TASKS.on_store(vaddr, || match info.value() {
            MemValue::U64(task) => task,
            _ => 0,
        });
    }
    if store || site.loads {
        on_access(site.pc, site.store, &info, vaddr);
    }
}

#[derive(Clone, Copy)]
struct RegisterHandle(*mut qemu_plugin_register);

// SAFETY: QEMU's register handles are register numbers, not pointers to anything.
unsafe impl Send for RegisterHandle {}
unsafe impl Sync for RegisterHandle {}

/// A register read without allocating: the crate's `RegisterDescriptor::read` allocates a
/// glib array and a Vec per read, too slow for reads on every call and return.
struct RawRegister {
    handle: RegisterHandle,
    buffer: *mut GByteArray,
}

extern "C" {
    fn g_byte_array_set_size(array: *mut GByteArray, length: u32) -> *mut GByteArray;
    fn g_array_free(array: *mut GArray, free_segment: bool) -> *mut std::ffi::c_char;
}

impl RawRegister {
    fn new(handle: RegisterHandle) -> RawRegister {
        RawRegister {
            handle,
            // SAFETY: plain allocation; the array lives as long as the thread's stacks.
            buffer: unsafe { g_byte_array_new() },
        }
    }

    /// The current vCPU's registers of these names (QEMU's gdb names), in order.
    fn find<const N: usize>(names: [&str; N]) -> [Option<RegisterHandle>; N] {
        let mut found = [None; N];
        // SAFETY: QEMU returns a GArray of descriptors that the caller frees.
        unsafe {
            let array = qemu_plugin::sys::qemu_plugin_get_registers();
            if array.is_null() {
                return found;
            }
            let descriptors = std::slice::from_raw_parts(
                (*array).data as *const qemu_plugin_reg_descriptor,
                (*array).len as usize,
            );
            for d in descriptors {
                let name = std::ffi::CStr::from_ptr(d.name).to_string_lossy();
                if let Some(i) = names.iter().position(|n| *n == name) {
                    found[i] = Some(RegisterHandle(d.handle));
                }
            }
            g_array_free(array, true);
        }
        found
    }

    fn read(&mut self) -> u64 {
        // SAFETY: a live handle and GByteArray; QEMU appends the register's bytes.
        unsafe {
            g_byte_array_set_size(self.buffer, 0);
            if qemu_plugin_read_register(self.handle.0, self.buffer) < 0 {
                return 0;
            }
            let bytes =
                std::slice::from_raw_parts((*self.buffer).data, (*self.buffer).len as usize);
            let mut le = [0u8; 8];
            let n = bytes.len().min(8);
            le[..n].copy_from_slice(&bytes[..n]);
            u64::from_le_bytes(le)
        }
    }
}

fn read_u64(reg: &RegisterDescriptor) -> u64 {
    let bytes = reg.read().unwrap_or_default();
    let mut le = [0u8; 8];
    let n = bytes.len().min(8);
    le[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(le)
}

/// Reads guest virtual memory (through the current vCPU's page tables) into a GByteArray
/// that QEMU resizes, so it must be glib's: allocated once, reused for every read. (The
/// qemu-plugin crate's wrapper passes a plain struct instead, which glib cannot resize.)
struct GuestMemory(*mut GByteArray);

// SAFETY: the array is used only from vCPU callbacks, which hold the state lock.
unsafe impl Send for GuestMemory {}

extern "C" {
    /// From the glib that QEMU links.
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_byte_array_free(array: *mut GByteArray, free_segment: i32) -> *mut u8;
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        // SAFETY: the array was allocated by `g_byte_array_new` and is not used after this.
        unsafe { g_byte_array_free(self.0, 1) };
    }
}

impl GuestMemory {
    fn new() -> GuestMemory {
        // SAFETY: plain allocation; the array lives as long as the plugin.
        GuestMemory(unsafe { g_byte_array_new() })
    }

    /// A stack frame: the saved rbp and the return address above it.
    fn read_frame(&mut self, addr: u64) -> Option<(u64, u64)> {
        let mut frame = [0u8; 16];
        if !self.read_vaddr(addr, &mut frame) {
            return None;
        }
        let word = |at: usize| u64::from_le_bytes(frame[at..at + 8].try_into().unwrap());
        Some((word(0), word(8)))
    }

    /// `buf.len()` bytes at virtual address `vaddr` of the running vCPU.
    fn read_vaddr(&mut self, vaddr: u64, buf: &mut [u8]) -> bool {
        // SAFETY: `self.0` is a live GByteArray; QEMU sets its size on success.
        unsafe {
            if !qemu_plugin_read_memory_vaddr(vaddr, self.0, buf.len()) {
                return false;
            }
            let bytes = std::slice::from_raw_parts((*self.0).data, (*self.0).len as usize);
            if bytes.len() != buf.len() {
                return false;
            }
            buf.copy_from_slice(bytes);
        }
        true
    }
}

impl PhysMemory for GuestMemory {
    /// Through the kernel's direct map (the guest runs with `nokaslr`): the NVMe
    /// registers are written by the driver, in kernel mode, where the map is present.
    fn read(&mut self, paddr: u64, buf: &mut [u8]) -> bool {
        self.read_vaddr(DIRECT_MAP_BASE + paddr, buf)
    }
}

fn state() -> MutexGuard<'static, State> {
    let state = STATE
        .get()
        .expect("the plugin is installed before any callback");
    // A panic in a callback aborts QEMU, so the lock is never poisoned in a live process.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn say(message: &str) {
    let _ = qemu_plugin_outs(format!("persim-plugin: {message}\n"));
}

struct PersimPlugin;

impl Register for PersimPlugin {
    fn register(
        &mut self,
        id: PluginId,
        args: &qemu_plugin::Args,
        _info: &Info,
    ) -> qemu_plugin::Result<()> {
        let args = PluginArgs::parse(args.raw.iter().map(String::as_str)).map_err(|e| {
            qemu_plugin::Error::IoError(std::io::Error::other(format!("persim-plugin: {e}")))
        })?;
        PM_BASE.store(args.pm_base, Ordering::Relaxed);
        PM_SIZE.store(args.pm_size, Ordering::Relaxed);
        EVERY_STORE.store(args.every_store, Ordering::Relaxed);
        SERIAL.store(args.serial, Ordering::Relaxed);
        PROFILE.store(args.profile, Ordering::Relaxed);
        let nvme = (args.blk_size > 0).then(|| {
            (
                NvmeDecoder::new(NVME_LBA_SIZE, args.reads),
                GuestMemory::new(),
            )
        });
        let counter = args.count.then(|| {
            let _ = INSTRUCTIONS.set(Scoreboard::new());
            Counter::new(&args)
        });
        let calls = match &args.calls {
            Some(path) => {
                let table = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))
                    .and_then(|text| persim_abi::calls::parse_table(&text))
                    .map_err(|e| {
                        qemu_plugin::Error::IoError(std::io::Error::other(format!(
                            "persim-plugin: calls: {e}"
                        )))
                    })?;
                Some((
                    CallTable::new(table),
                    GuestMemory::new(),
                    PendingReturns::default(),
                ))
            }
            None => None,
        };
        let state = State {
            id,
            calls,
            counter,
            tracer: Tracer::new(args),
            registers: Registers::default(),
            nvme,
        };
        if STATE.set(Mutex::new(state)).is_err() {
            return Err(qemu_plugin::Error::PluginInstanceSetError);
        }
        register_callbacks(id)
    }
}

impl HasCallbacks for PersimPlugin {
    fn on_vcpu_init(&mut self, _id: PluginId, _vcpu: VCPUIndex) -> qemu_plugin::Result<()> {
        let mut registers = Registers {
            gprs: vec![None; GPR_NAMES.len()],
            ..Registers::default()
        };
        for reg in qemu_plugin_get_registers()? {
            if let Some(n) = GPR_NAMES.iter().position(|name| *name == reg.name) {
                registers.gprs[n] = Some(reg);
            } else if reg.name == "fs_base" {
                registers.fs_base = Some(reg);
            } else if reg.name == "gs_base" {
                registers.gs_base = Some(reg);
            } else if reg.name == "k_gs_base" {
                registers.k_gs_base = Some(reg);
            } else if reg.name == "cr3" {
                registers.cr3 = Some(reg);
            }
        }
        if registers.gprs.iter().any(Option::is_none) {
            say("QEMU does not expose all general-purpose registers: flush addresses may be wrong");
        }
        let mut s = state();
        if s.counter.is_some() {
            if let Err(e) = rep_stores::init() {
                say(e);
            }
        }
        const RBP: usize = 5;
        match s.tracer.stacks() {
            Stacks::Off => {}
            Stacks::FramePointers => match registers.gprs[RBP].clone() {
                Some(rbp) => {
                    let mut memory = GuestMemory::new();
                    s.tracer.set_stack_source(Box::new(move |_| {
                        stack::walk(read_u64(&rbp), |frame| memory.read_frame(frame))
                    }));
                }
                None => say("QEMU does not expose rbp: entries get no stack traces"),
            },
            Stacks::Shadow => match RawRegister::find(["rsp", "cr3", "fs_base"]) {
                [Some(rsp), cr3, fs_base] => {
                    if cr3.is_none() {
                        say("QEMU does not expose cr3: user processes may share shadow stacks");
                    }
                    let _ = SHADOW_REGISTERS.set(ShadowRegisters { rsp, cr3, fs_base });
                    s.tracer.set_stack_source(Box::new(|pc| {
                        with_shadow(|shadow| shadow.current(pc)).unwrap_or_default()
                    }));
                }
                _ => say("QEMU does not expose rsp: entries get no stack traces"),
            },
        }
        s.registers = registers;
        Ok(())
    }
}

qemu_plugin::register!(PersimPlugin);

/// The callbacks that survive a reset (at `start` all callbacks are dropped with the
/// translation cache and registered again).
fn register_callbacks(id: PluginId) -> qemu_plugin::Result<()> {
    qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate))?;
    qemu_plugin_register_atexit_cb(id, |_| on_exit())
}

/// After the reset at `start` (translation cache flushed, all callbacks dropped).
extern "C" fn on_reset(id: PluginId) {
    if let Err(e) = register_callbacks(id) {
        say(&format!("cannot re-register callbacks after start: {e}"));
    }
}

extern "C" fn on_translate(_id: PluginId, tb: *mut qemu_plugin_tb) {
    let (tracing, reads, stacks, counting, returns) = {
        let s = state();
        // The counting mode instruments from the moment QEMU loads it, not from `start`:
        // retranslating everything at `start` and again at `success` was a fixed cost of
        // the order of the workload's own (docs/results/performance.md, "Counting mode"). The counts
        // are zeroed at `start`.
        let counting = s.counter.is_some();
        let returns = s.calls.as_ref().is_some_and(|c| c.0.watches_returns());
        (
            s.tracer.tracing(),
            s.tracer.reads(),
            s.tracer.stacks(),
            counting,
            returns,
        )
    };
    let raw_tb = tb;
    if counting {
        count_instructions(raw_tb);
    }
    let tb = TranslationBlock::from(tb);
    for (i, insn) in tb.instructions().enumerate() {
        let bytes = insn.data();
        let (pc, len) = (insn.vaddr(), insn.size() as u64);
        let class = classify(&bytes);
        let regs = register_access(stacks, pc);
        if class == Class::Cpuid {
            insn.register_execute_callback_flags(
                move |_| on_cpuid(pc),
                CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
            );
        }
        if counting && counts_stores(pc, len, &bytes) {
            // SAFETY: the instruction handle of this translation callback.
            let raw_insn = unsafe { qemu_plugin::sys::qemu_plugin_tb_get_insn(raw_tb, i) };
            let accounted = accounts_executions(pc, &bytes)
                .is_some_and(|size| rep_stores::instrument(raw_insn, size));
            if !accounted {
                // SAFETY: as above.
                unsafe {
                    qemu_plugin::sys::qemu_plugin_register_vcpu_mem_cb(
                        raw_insn,
                        Some(on_counted_store),
                        CallbackFlags::QEMU_PLUGIN_CB_NO_REGS,
                        MemRW::QEMU_PLUGIN_MEM_W,
                        std::ptr::null_mut(),
                    );
                }
            }
        }
        if !tracing {
            continue;
        }
        if !is_kernel(pc) {
            if let Some(function) = traced_function(pc) {
                insn.register_execute_callback_flags(
                    move |_| on_call(pc, function),
                    CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
                );
            }
            if returns && class == Class::Ret {
                insn.register_execute_callback_flags(
                    |_| on_ret(),
                    CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
                );
            }
        }
        match class {
            Class::Flush(kind, operand) => insn.register_execute_callback_flags(
                move |_| on_flush(pc, len, kind, operand),
                CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
            ),
            Class::Fence(kind) => {
                insn.register_execute_callback_flags(move |_| state().tracer.fence(pc, kind), regs)
            }
            Class::Locked => insn.register_execute_callback_flags(
                move |_| state().tracer.fence(pc, FenceKind::Locked),
                regs,
            ),
            Class::Serializing => insn.register_execute_callback_flags(
                move |_| state().tracer.fence(pc, FenceKind::Serializing),
                regs,
            ),
            Class::Iret if stacks == Stacks::Shadow => insn.register_execute_callback_flags(
                move |_| {
                    with_shadow(Shadow::iret);
                    state().tracer.fence(pc, FenceKind::Interrupt)
                },
                CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
            ),
            Class::Iret => insn.register_execute_callback_flags(
                move |_| state().tracer.fence(pc, FenceKind::Interrupt),
                regs,
            ),
            Class::Plain
            | Class::NtStore
            | Class::StringStore
            | Class::Cpuid
            | Class::Call
            | Class::Ret => {}
        }
        let site = AccessSite {
            pc,
            store: match class {
                Class::NtStore => Store::NonTemporal,
                Class::StringStore => Store::String,
                _ => Store::Cached,
            },
            stack: match class {
                Class::Call if stacks == Stacks::Shadow => StackOp::Call(pc + len),
                Class::Ret if stacks == Stacks::Shadow => StackOp::Ret,
                _ => StackOp::None,
            },
            loads: reads,
        };
        let rw = match (site.stack, reads) {
            (StackOp::Ret, _) => MemRW::QEMU_PLUGIN_MEM_R,
            (_, true) => MemRW::QEMU_PLUGIN_MEM_RW,
            (_, false) => MemRW::QEMU_PLUGIN_MEM_W,
        };
        let data = Box::into_raw(Box::new(site));
        // SAFETY: the instruction handle of this translation callback; `data` lives for
        // the rest of the process.
        unsafe {
            let raw_insn = qemu_plugin::sys::qemu_plugin_tb_get_insn(raw_tb, i);
            qemu_plugin::sys::qemu_plugin_register_vcpu_mem_cb(
                raw_insn,
                Some(on_access_raw),
                regs,
                rw,
                data.cast(),
            );
        }
    }
}

/// Whether the callbacks of the instruction at `pc` read registers: frame-pointer walks
/// read rbp, and user code's shadow stack rsp, cr3 and fs_base (a user stack has no fixed
/// place). Kernel code's shadow stack needs none, and a callback that reads registers
/// makes QEMU write the guest's registers back before every call of it, a cost paid on
/// every store of the kernel otherwise (docs/results/performance.md).
fn register_access(stacks: Stacks, pc: u64) -> CallbackFlags {
    match stacks {
        Stacks::FramePointers => CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
        Stacks::Shadow if !is_kernel(pc) => CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
        Stacks::Off | Stacks::Shadow => CallbackFlags::QEMU_PLUGIN_CB_NO_REGS,
    }
}

/// x86-64's kernel half of the address space.
fn is_kernel(address: u64) -> bool {
    address >> 63 == 1
}

fn on_access(pc: u64, store: Store, info: &MemoryInfo, vaddr: u64) {
    let Some(hwaddr) = info.hwaddr(vaddr) else {
        return;
    };
    if hwaddr.is_io() {
        if info.is_store() {
            on_io_store(pc, &hwaddr, info);
        }
        return;
    }
    let paddr = hwaddr.hwaddr();
    if paddr.wrapping_sub(PM_BASE.load(Ordering::Relaxed)) >= PM_SIZE.load(Ordering::Relaxed) {
        return;
    }
    let size = 1u64 << info.size_shift();
    let data = info
        .is_store()
        .then(|| value_bytes(info.value(), size as usize));
    state().tracer.access(pc, vaddr, paddr, size, data, store);
}

/// A store to a device: the NVMe controller's registers feed the decoder.
fn on_io_store(pc: u64, hwaddr: &qemu_plugin::HwAddr, info: &MemoryInfo) {
    let mut s = state();
    let State {
        tracer,
        nvme,
        counter,
        ..
    } = &mut *s;
    let Some((decoder, memory)) = nvme else {
        return;
    };
    if hwaddr.device_name().ok().flatten().as_deref() != Some(NVME_REGISTERS) {
        return;
    }
    let size = 1u64 << info.size_shift();
    let mut value = [0u8; 8];
    let bytes = value_bytes(info.value(), size.min(8) as usize);
    value[..bytes.len()].copy_from_slice(&bytes);
    let value = u64::from_le_bytes(value);
    let offset = hwaddr.hwaddr() & (NVME_REGISTER_SPAN - 1);
    let ops = decoder.register_write(offset, value, size, memory);
    for problem in decoder.problems.drain(..) {
        say(&format!("NVMe: {problem}"));
    }
    if let Some(counter) = counter {
        counter.block(&ops);
    }
    tracer.block(pc, ops);
}

/// A store's value as the bytes it puts in memory (x86 is little-endian).
fn value_bytes(value: MemValue, size: usize) -> Vec<u8> {
    let mut bytes = match value {
        MemValue::U8(v) => v.to_le_bytes().to_vec(),
        MemValue::U16(v) => v.to_le_bytes().to_vec(),
        MemValue::U32(v) => v.to_le_bytes().to_vec(),
        MemValue::U64(v) => v.to_le_bytes().to_vec(),
        MemValue::U128(v) => v.to_le_bytes().to_vec(),
    };
    bytes.truncate(size);
    bytes
}

/// Counting mode: guest instructions per vCPU, kernel and user apart (two u64 per entry),
/// added inline by the translated code itself (no callback per block).
static INSTRUCTIONS: OnceLock<Scoreboard> = OnceLock::new();
/// Counting mode: bytes stored to PM.
static PM_STORED: AtomicU64 = AtomicU64::new(0);

struct Scoreboard {
    board: *mut qemu_plugin::sys::qemu_plugin_scoreboard,
    /// With `serial=on`: (kernel, user) instructions added by a callback per block.
    counted: [AtomicU64; 2],
    /// The sums at `start`, subtracted at `success`/`fail`.
    base: Mutex<(u64, u64)>,
}

// SAFETY: QEMU's scoreboard is made for use from every vCPU thread.
unsafe impl Send for Scoreboard {}
unsafe impl Sync for Scoreboard {}

impl Scoreboard {
    fn new() -> Scoreboard {
        Scoreboard {
            // SAFETY: plain allocation, kept for the life of the plugin.
            board: unsafe { qemu_plugin::sys::qemu_plugin_scoreboard_new(16) },
            counted: [AtomicU64::new(0), AtomicU64::new(0)],
            base: Mutex::new((0, 0)),
        }
    }

    fn entry(&self, kernel: bool) -> qemu_plugin::sys::qemu_plugin_u64 {
        qemu_plugin::sys::qemu_plugin_u64 {
            score: self.board,
            offset: if kernel { 0 } else { 8 },
        }
    }

    /// (kernel, user) instructions of all vCPUs so far.
    fn sums(&self) -> (u64, u64) {
        let counted = |i: usize| self.counted[i].load(Ordering::Relaxed);
        // SAFETY: entries of this live scoreboard.
        unsafe {
            (
                qemu_plugin::sys::qemu_plugin_u64_sum(self.entry(true)) + counted(0),
                qemu_plugin::sys::qemu_plugin_u64_sum(self.entry(false)) + counted(1),
            )
        }
    }
}

/// Adds the block's instruction count to its half (kernel or user) each time it runs.
fn count_instructions(tb: *mut qemu_plugin_tb) {
    let Some(board) = INSTRUCTIONS.get() else {
        return;
    };
    // SAFETY: the translation block of this translation callback.
    unsafe {
        let n = qemu_plugin::sys::qemu_plugin_tb_n_insns(tb) as u64;
        let vaddr = qemu_plugin::sys::qemu_plugin_tb_vaddr(tb);
        let kernel = is_kernel(vaddr);
        if kernel && PROFILE.load(Ordering::Relaxed) {
            block_profile::instrument(tb, vaddr, n);
        }
        if SERIAL.load(Ordering::Relaxed) {
            // The count and the half travel as the callback's data, not as a pointer.
            qemu_plugin::sys::qemu_plugin_register_vcpu_tb_exec_cb(
                tb,
                Some(on_counted_block),
                qemu_plugin::sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                (n << 1 | u64::from(!kernel)) as *mut std::ffi::c_void,
            );
            return;
        }
        qemu_plugin::sys::qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb,
            qemu_plugin::sys::qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
            board.entry(kernel),
            n,
        );
    }
}

/// With `serial=on`: a counted block ran (data: its instruction count, then the half).
unsafe extern "C" fn on_counted_block(_vcpu: std::ffi::c_uint, data: *mut std::ffi::c_void) {
    let (n, half) = (data as u64 >> 1, data as usize & 1);
    if let Some(board) = INSTRUCTIONS.get() {
        board.counted[half].fetch_add(n, Ordering::Relaxed);
    }
}

/// Whether the counting mode instruments an instruction's stores: every store with
/// `every_store=on`; otherwise, in the kernel all but those to its stack, its per-CPU
/// data and the global variables of its image and modules (never PM nor a device), in
/// user space none until the kernel has written a page-table entry that maps PM for user
/// space ([`crate::counter::maps_user_pm`]; docs/results/performance.md, "Counting mode").
fn counts_stores(pc: u64, len: u64, bytes: &[u8]) -> bool {
    if EVERY_STORE.load(Ordering::Relaxed) {
        return true;
    }
    if !is_kernel(pc) {
        return USER_PM_MAPPED.load(Ordering::Relaxed);
    }
    match store_target(bytes, pc, len) {
        StoreTarget::Stack | StoreTarget::PerCpu => false,
        StoreTarget::Fixed(vaddr) => !in_kernel_image(vaddr),
        StoreTarget::Anywhere => true,
    }
}

/// The element size of a kernel `rep movs`/`rep stos` that the counting mode accounts per
/// execution (`crate::string_stores`) rather than per stored element; never with
/// `every_store=on`, the reference, nor with `serial=on` (the accounting adds inline per
/// vCPU). User code keeps a callback per element: its page
/// tables lack the direct map through which they would be read.
fn accounts_executions(pc: u64, bytes: &[u8]) -> Option<u64> {
    if EVERY_STORE.load(Ordering::Relaxed) || SERIAL.load(Ordering::Relaxed) || !is_kernel(pc) {
        return None;
    }
    rep_string_store(bytes)
}

/// A kernel store that maps PM for user space: from now on user stores are instrumented
/// too, after a retranslation (the user code runs only after the kernel has returned to
/// it, which is many translation blocks after this store, and the reset takes effect at
/// the end of the current one). A store is such an entry when its value looks like one
/// ([`maps_user_pm`]) and it went, through the direct map, into a user page table of the
/// running address space: values that only look like entries are common (numbers just
/// above 4 GiB, where PM starts), and one opened the gate in every run of the overhead
/// bench before (docs/results/performance.md, "Counting mode").
fn watch_user_mappings(info: qemu_plugin::sys::qemu_plugin_meminfo_t, vaddr: u64) {
    use qemu_plugin::sys::qemu_plugin_mem_value_type::QEMU_PLUGIN_MEM_VALUE_U64;
    // SAFETY: the memory access handle of the running callback.
    if unsafe { qemu_plugin::sys::qemu_plugin_mem_size_shift(info) } != 3 {
        return;
    }
    let slot = vaddr.wrapping_sub(DIRECT_MAP_BASE);
    if slot >= DIRECT_MAP_SIZE {
        return;
    }
    // SAFETY: as above.
    let value = unsafe { qemu_plugin::sys::qemu_plugin_mem_get_value(info) };
    if value.type_ != QEMU_PLUGIN_MEM_VALUE_U64 {
        return;
    }
    // SAFETY: the union's member that `type_` names.
    let value = unsafe { value.data.u64_ };
    let (base, size) = (
        PM_BASE.load(Ordering::Relaxed),
        PM_SIZE.load(Ordering::Relaxed),
    );
    if maps_user_pm(slot, value, base, size)
        && in_running_user_tables(slot)
        && !USER_PM_MAPPED.swap(true, Ordering::Relaxed)
    {
        let id = state().id;
        // SAFETY: as at `start` in `on_counted_call`.
        unsafe { qemu_plugin::sys::qemu_plugin_reset(id, Some(on_reset)) };
    }
}

thread_local! {
    /// This vCPU thread's cr3 reader and page-table reader, made on first use.
    static TABLES: RefCell<Option<(Option<RawRegister>, GuestMemory)>> =
        const { RefCell::new(None) };
}

/// Whether guest-physical `slot` is in a user page table of the running address space.
/// The kernel writes a process's entries while it runs in that process (its page faults,
/// its `mmap`), with cr3 at the process's tables. cr3 is no TCG global, so QEMU 10.0
/// reads it right in a memory callback without registers; where it cannot, the store
/// counts as an entry (the gate opens on the value alone: slower, never a missed byte).
fn in_running_user_tables(slot: u64) -> bool {
    TABLES.with_borrow_mut(|tables| {
        let (cr3, memory) = tables.get_or_insert_with(|| {
            let [cr3] = RawRegister::find(["cr3"]);
            (cr3.map(RawRegister::new), GuestMemory::new())
        });
        match cr3.as_mut().map(RawRegister::read) {
            Some(root) if root != 0 => is_user_table(memory, root, slot & !0xfff),
            _ => true,
        }
    })
}

/// x86-64's mapping of the kernel image (`__START_KERNEL_map`) and the end of the modules'
/// space after it (`MODULES_END`, 4-level paging): both hold memory from the page
/// allocator or the kernel's load, never PM (ZONE_DEVICE pages) or a device's registers.
const KERNEL_IMAGE_BASE: u64 = 0xffff_ffff_8000_0000;
const MODULES_END: u64 = 0xffff_ffff_ff00_0000;

/// Whether `vaddr` is in the kernel image's or the modules' mapping.
fn in_kernel_image(vaddr: u64) -> bool {
    (KERNEL_IMAGE_BASE..MODULES_END).contains(&vaddr)
}

/// Counting mode: a store, to PM (counted) or to a device (the NVMe decoder).
unsafe extern "C" fn on_counted_store(
    _vcpu: std::ffi::c_uint,
    info: qemu_plugin::sys::qemu_plugin_meminfo_t,
    vaddr: u64,
    _data: *mut std::ffi::c_void,
) {
    // With every store instrumented the gate changes nothing: no look-ups, no reset.
    if !EVERY_STORE.load(Ordering::Relaxed) && !USER_PM_MAPPED.load(Ordering::Relaxed) {
        watch_user_mappings(info, vaddr);
    }
    let info = MemoryInfo::from(info);
    // The direct map is linear and holds no device registers: its physical address needs
    // no look-up in QEMU's TLB (most kernel stores, PM's included, go through it). The
    // reference (`every_store=on`) looks every address up, so the exactness test checks
    // these short cuts too.
    let short_cuts = !EVERY_STORE.load(Ordering::Relaxed);
    let paddr = match vaddr.wrapping_sub(DIRECT_MAP_BASE) {
        offset if short_cuts && offset < DIRECT_MAP_SIZE => offset,
        // The kernel image's and the modules' data are RAM, never PM nor a device.
        _ if short_cuts && in_kernel_image(vaddr) => return,
        _ => {
            let Some(hwaddr) = info.hwaddr(vaddr) else {
                return;
            };
            if hwaddr.is_io() {
                return on_io_store(0, &hwaddr, &info);
            }
            hwaddr.hwaddr()
        }
    };
    if paddr.wrapping_sub(PM_BASE.load(Ordering::Relaxed)) < PM_SIZE.load(Ordering::Relaxed) {
        PM_STORED.fetch_add(1 << info.size_shift(), Ordering::Relaxed);
    }
}

/// A hypercall in counting mode: `start` zeroes the counts; `success`/`fail` writes them.
fn on_counted_call(s: &mut State, call: persim_trace::Hypercall) {
    let Some(counter) = &mut s.counter else {
        return;
    };
    let Some(board) = INSTRUCTIONS.get() else {
        return;
    };
    match counter.hypercall(call) {
        CounterNext::Continue => {}
        CounterNext::Start => {
            *board.base.lock().unwrap() = board.sums();
            rep_stores::forget();
            block_profile::reset();
            PM_STORED.store(0, Ordering::Relaxed);
        }
        CounterNext::Finish => {
            rep_stores::settle_all();
            let (kernel, user) = board.sums();
            let base = *board.base.lock().unwrap();
            let counts = Counts {
                kernel_instructions: kernel - base.0,
                user_instructions: user - base.1,
                pm_bytes_written: PM_STORED.load(Ordering::Relaxed),
                nvme_bytes_written: 0,
                user_stores_counted: EVERY_STORE.load(Ordering::Relaxed)
                    || USER_PM_MAPPED.load(Ordering::Relaxed),
                kernel_blocks: block_profile::take(),
            };
            if let Err(e) = counter.finish(counts) {
                say(&e);
            }
        }
    }
}

fn on_flush(pc: u64, len: u64, kind: FlushKind, operand: MemOperand) {
    let mut s = state();
    let regs = &s.registers;
    let vaddr = operand.address(pc, len, |n| regs.gpr(n), |seg| regs.segment_base(seg));
    s.tracer.flush(pc, kind, vaddr);
}

/// The traced function that starts at user address `pc` (at translation time).
fn traced_function(pc: u64) -> Option<usize> {
    let mut s = state();
    let (table, memory, _) = s.calls.as_mut()?;
    table.function_at(pc, |buf| memory.read_vaddr(pc, buf))
}

const RAX: u8 = 0;
const RDX: u8 = 2;
const RSP: u8 = 4;

/// What a call or return entry is made of: the state's parts it uses, and the running
/// address space (cr3).
struct CallSite<'a> {
    tracer: &'a mut Tracer,
    table: &'a mut CallTable,
    memory: &'a mut GuestMemory,
    pending: &'a mut PendingReturns,
    registers: &'a Registers,
    cr3: u64,
}

impl State {
    /// None without `calls=PATH`.
    fn call_site(&mut self) -> Option<CallSite<'_>> {
        let (table, memory, pending) = self.calls.as_mut()?;
        let cr3 = self.registers.cr3.as_ref().map_or(0, read_u64);
        Some(CallSite {
            tracer: &mut self.tracer,
            table,
            memory,
            pending,
            registers: &self.registers,
            cr3,
        })
    }
}

/// The first instruction of a traced function: a call entry with its arguments, those
/// that point into PM translated through the process's page tables (and a freed object's
/// size after them); and, if its return is recorded, the slot of its return address (at
/// the stack pointer now) is awaited.
fn on_call(pc: u64, function: usize) {
    const ARGUMENT_REGISTERS: [u8; 6] = [7, 6, 2, 1, 8, 9];
    let mut s = state();
    let Some(c) = s.call_site() else {
        return;
    };
    let registers = ARGUMENT_REGISTERS.map(|r| c.registers.gpr(r));
    let memory = &mut *c.memory;
    let (values, freed_size) = c.table.arguments(function, c.cr3, registers, |at, buf| {
        memory.read_vaddr(at, buf)
    });
    let mut args: Vec<Arg> = values
        .into_iter()
        .map(|v| translated_arg(c.tracer, memory, c.cr3, v))
        .collect();
    args.extend(freed_size.map(Arg::Value));
    c.tracer.call(pc, c.table.name(function), args);
    if c.table.returns(function) != ReturnRole::Ignored {
        let fs_base = c.registers.segment_base(Segment::Fs);
        c.pending
            .called((c.cr3, fs_base), c.registers.gpr(RSP), function);
        AWAITING_RETURN.store(true, Ordering::Relaxed);
    }
}

/// A user `ret`, before it pops its return address: the return entry of the traced call
/// whose return address is in that slot, if one is awaited.
fn on_ret() {
    if !AWAITING_RETURN.load(Ordering::Relaxed) {
        return;
    }
    let mut s = state();
    let Some(c) = s.call_site() else {
        return;
    };
    let stack = (c.cr3, c.registers.segment_base(Segment::Fs));
    let slot = c.registers.gpr(RSP);
    let returned = c.pending.returning(stack, slot);
    AWAITING_RETURN.store(!c.pending.is_empty(), Ordering::Relaxed);
    let Some(function) = returned else {
        return;
    };
    let mut to = [0u8; 8];
    if !c.memory.read_vaddr(slot, &mut to) {
        return;
    }
    let (rax, rdx) = (c.registers.gpr(RAX), c.registers.gpr(RDX));
    let value = c.table.return_value(function, c.cr3, rax, rdx);
    let value = translated_arg(c.tracer, c.memory, c.cr3, value);
    c.tracer
        .ret(u64::from_le_bytes(to), c.table.name(function), value);
}

/// A call's argument or return value: a PM offset where it is a user address in PM.
fn translated_arg(tracer: &Tracer, memory: &mut GuestMemory, cr3: u64, value: u64) -> Arg {
    let paddr = calls::may_be_address(value)
        .then(|| physical::translate(memory, cr3, value))
        .flatten()
        .map(|(paddr, _)| paddr);
    tracer.arg(value, paddr)
}

fn on_cpuid(pc: u64) {
    let mut s = state();
    let regs = &s.registers;
    const RSI: u8 = 6;
    const RDI: u8 = 7;
    let call = hypercall::decode(
        regs.gpr(0),
        regs.gpr(2),
        regs.gpr(1),
        regs.gpr(RSI),
        regs.gpr(RDI),
    );
    let call = match call {
        Some(Call::Start { .. }) if s.counter.is_some() => {
            return on_counted_call(&mut s, Hypercall::Start)
        }
        Some(Call::Start {
            pid,
            current_task,
            preempt_count,
        }) => {
            if !s.tracer.tracing() {
                watch_tasks(&mut s, pid, current_task);
                watch_interrupts(&mut s, preempt_count);
            }
            Hypercall::Start
        }
        Some(Call::Mark(call)) if s.counter.is_some() => return on_counted_call(&mut s, call),
        Some(Call::Mark(call)) => call,
        Some(Call::Volatile { vaddr, len }) => return on_volatile(&mut s, pc, vaddr, len),
        None => {
            // An ordinary cpuid serializes like any other serializing instruction.
            if s.tracer.tracing() {
                s.tracer.fence(pc, FenceKind::Serializing);
            }
            return;
        }
    };
    match s.tracer.hypercall(call, pc) {
        Ok(Next::Continue) => {}
        Ok(Next::FlushTranslations) => {
            // The qemu-plugin crate's safe wrapper (10.1.0-v2) never calls its reset
            // callback, so the C API is called directly.
            // SAFETY: `on_reset` matches qemu_plugin_simple_cb_t and lives forever.
            unsafe { qemu_plugin::sys::qemu_plugin_reset(s.id, Some(on_reset)) };
        }
        Err(e) => say(&e),
    }
}

/// At `start`, from the calling `hypercall` process: finds the running task's pointer and
/// its fields (`crate::task`) and has the tracer record thread switches, or says why not.
fn watch_tasks(s: &mut State, pid: u32, current_task: u64) {
    TASKS.stop();
    s.tracer.set_task_source(None);
    if current_task == 0 {
        return say(
            "`hypercall start` found no current_task or pcpu_hot in /proc/kallsyms: \
             the trace records no threads",
        );
    }
    let Some(gs) = s.registers.k_gs_base.as_ref().map(read_u64) else {
        return say("QEMU does not expose k_gs_base: the trace records no threads");
    };
    let slot = gs.wrapping_add(current_task);
    let mut memory = GuestMemory::new();
    let mut word = [0u8; 8];
    let mut task = vec![0u8; TASK_SEARCHED];
    let layout = memory
        .read_vaddr(slot, &mut word)
        .then(|| u64::from_le_bytes(word))
        .filter(|&current| memory.read_vaddr(current, &mut task))
        .and_then(|current| Some((current, TaskLayout::find(&task, pid)?)));
    let Some((current, layout)) = layout else {
        return say(&format!(
            "cannot find pid {pid} and the name `hypercall` in the running task_struct \
             (per-CPU slot {slot:#x}): the trace records no threads"
        ));
    };
    TASKS.watch(slot, current, layout);
    s.tracer.set_task_source(Some(Box::new(move || {
        let task = TASKS.take_change()?;
        layout.read(task, |addr, buf| memory.read_vaddr(addr, buf))
    })));
}

/// The bits of the kernel's preemption count that say an interrupt is being handled: an
/// NMI, a hard interrupt, or a softirq being served (`SOFTIRQ_OFFSET`; the other softirq
/// bits count `local_bh_disable`, which the program's own code takes).
const IN_INTERRUPT: u32 = 0x00f0_0000 | 0x000f_0000 | 0x0000_0100;

/// At `start`: has the tracer tell the fences of interrupt handlers by the preemption count
/// of the one vCPU a traced guest has (its per-CPU copy at the kernel's gs base plus
/// `preempt_count`), or says why not.
fn watch_interrupts(s: &mut State, preempt_count: u64) {
    s.tracer.set_interrupt_source(None);
    if preempt_count == 0 {
        return say(
            "`hypercall start` found no __preempt_count or pcpu_hot in /proc/kallsyms: \
             interrupt handlers' fences count as the program's",
        );
    }
    let Some(gs) = s.registers.k_gs_base.as_ref().map(read_u64) else {
        return say(
            "QEMU does not expose k_gs_base: interrupt handlers' fences count as the program's",
        );
    };
    let slot = gs.wrapping_add(preempt_count);
    let mut memory = GuestMemory::new();
    s.tracer.set_interrupt_source(Some(Box::new(move || {
        let mut count = [0u8; 4];
        memory.read_vaddr(slot, &mut count) && u32::from_le_bytes(count) & IN_INTERRUPT != 0
    })));
}

/// `hypercall volatile`: the calling program's range, translated through its page tables.
fn on_volatile(s: &mut State, pc: u64, vaddr: u64, len: u64) {
    if !s.tracer.tracing() {
        return;
    }
    let Some(cr3) = s.registers.cr3.as_ref().map(read_u64) else {
        return say("QEMU does not expose cr3: `hypercall volatile` is ignored");
    };
    match physical::physical_runs(&mut GuestMemory::new(), cr3, vaddr, len) {
        Ok(runs) => {
            let outside = s.tracer.volatile(pc, &runs);
            if outside > 0 {
                say(&format!(
                    "hypercall volatile at {vaddr:#x}: {outside} of its {len} bytes are not PM \
                     and are ignored"
                ));
            }
        }
        Err(unmapped) => say(&format!(
            "hypercall volatile at {vaddr:#x} ({len} bytes): {unmapped:#x} is not mapped, so the \
             range is ignored; touch every page of it first (persim.h's persim_volatile does)"
        )),
    }
}

fn on_exit() {
    let mut s = state();
    let unresolved = s.tracer.unresolved_flushes;
    if unresolved > 0 {
        say(&format!(
            "{unresolved} flushes of never-accessed pages could not be placed and were dropped"
        ));
    }
    if s.tracer.tracing() {
        say("QEMU exits while tracing (no `hypercall success` or `fail`): the trace ends there");
    }
    if let Err(e) = s.tracer.finish() {
        say(&e);
    }
}
