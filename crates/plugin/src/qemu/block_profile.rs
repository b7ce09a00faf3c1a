//! The counting mode's kernel profile (`profile=on`): each kernel translation block counts
//! its executions with a callback, so that the host can add the instructions up by
//! function (`persim efficiency run --profile`).

use qemu_plugin::sys::{qemu_plugin_cb_flags, qemu_plugin_tb};
use std::collections::BTreeMap;
use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One translation of a kernel block.
struct Block {
    vaddr: u64,
    instructions: u64,
    runs: AtomicU64,
}

/// Every kernel block translated so far; one translated again has a second entry. Each
/// lives for the rest of the process (its callback's data points to it).
static BLOCKS: Mutex<Vec<&'static Block>> = Mutex::new(Vec::new());

fn blocks() -> std::sync::MutexGuard<'static, Vec<&'static Block>> {
    BLOCKS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts the executions of the block `tb` (of `instructions` at `vaddr`).
pub fn instrument(tb: *mut qemu_plugin_tb, vaddr: u64, instructions: u64) {
    let block: &'static Block = Box::leak(Box::new(Block {
        vaddr,
        instructions,
        runs: AtomicU64::new(0),
    }));
    blocks().push(block);
    // SAFETY: the translation block of the running translation callback; `block` is never
    // freed.
    unsafe {
        qemu_plugin::sys::qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(on_block),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            std::ptr::from_ref(block).cast_mut().cast(),
        );
    }
}

unsafe extern "C" fn on_block(_vcpu: c_uint, data: *mut c_void) {
    // SAFETY: `instrument` passed a leaked `Block`.
    let block = unsafe { &*data.cast::<Block>() };
    block.runs.fetch_add(1, Ordering::Relaxed);
}

/// At `start`: nothing executed before it counts.
pub fn reset() {
    blocks()
        .iter()
        .for_each(|b| b.runs.store(0, Ordering::Relaxed));
}

/// At `success`/`fail`: the instructions executed per block start address since `start`.
pub fn take() -> Vec<(u64, u64)> {
    let mut by_start = BTreeMap::<u64, u64>::new();
    for block in blocks().iter() {
        let runs = block.runs.swap(0, Ordering::Relaxed);
        if runs > 0 {
            *by_start.entry(block.vaddr).or_default() += runs * block.instructions;
        }
    }
    by_start.into_iter().collect()
}
