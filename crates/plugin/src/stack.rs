//! Stack traces for `--stack-traces`: a shadow call stack kept from the executed `call`
//! and `ret` instructions (code without frame pointers, e.g. the Debian kernel), and
//! frame-pointer walks (the cross-check on code built with them).

use std::collections::HashMap;

/// Return addresses recorded per entry at most: enough to see through a library into its
/// caller, cheap enough to walk on every PM access.
pub const MAX_DEPTH: usize = 16;

/// Kernel thread stacks (and the IRQ and exception stacks) are `THREAD_SIZE`-aligned
/// regions of 16 KiB on x86-64, so a kernel stack pointer names its stack by its region.
const KERNEL_STACK_SHIFT: u32 = 14;

/// Frames kept per stack at most; a deeper recursion loses its outermost frames.
const MAX_FRAMES: usize = 4096;

/// Which stack a stack pointer is on: a kernel stack by its region; a user thread by its
/// address space (cr3) and thread pointer (fs_base), since user stacks have no fixed size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackKey {
    Kernel(u64),
    User { cr3: u64, fs_base: u64 },
}

impl StackKey {
    pub fn kernel(rsp: u64) -> StackKey {
        StackKey::Kernel(rsp >> KERNEL_STACK_SHIFT)
    }
}

/// One shadow call stack per stack seen. Each frame is the return address a `call` pushed
/// and the stack slot it pushed it to. A frame is live while its slot is at or above the
/// stack pointer, so the stacks resynchronise by themselves whatever the control flow
/// (returns not seen, `longjmp`, exceptions, retpoline thunks, frames called before
/// tracing started are simply missing); a `ret` drops the frame it returns through and
/// any below it. Context switches change the stack, so threads never mix.
pub struct ShadowStacks {
    /// The stack of the last access, out of the map: consecutive calls and returns are
    /// nearly always on one stack, and hashing on each was a tenth of the cost.
    key: StackKey,
    frames: Vec<Frame>,
    others: HashMap<StackKey, Vec<Frame>>,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    slot: u64,
    ret: u64,
}

impl Default for ShadowStacks {
    fn default() -> Self {
        ShadowStacks {
            key: StackKey::Kernel(0),
            frames: Vec::new(),
            others: HashMap::new(),
        }
    }
}

impl ShadowStacks {
    /// A `call` about to execute with stack pointer `rsp`, returning to `ret`.
    pub fn call(&mut self, key: StackKey, rsp: u64, ret: u64) {
        let slot = rsp.wrapping_sub(8);
        let frames = self.stack(key);
        drop_below(frames, slot.wrapping_add(1));
        if frames.len() == MAX_FRAMES {
            frames.remove(0);
        }
        frames.push(Frame { slot, ret });
    }

    /// A `ret` from `slot` (its stack pointer) to `target()`: it ends the frame of that
    /// slot and any below it. A return through a slot no call pushed to, to the innermost
    /// frame's return address, ends that frame too: its code moved its return address
    /// down before returning (the kernel's `error_entry` pushes the registers under it),
    /// and the frame would otherwise outlive the return until the next call or return
    /// above it. `target` is asked only then, which is rare.
    pub fn ret(&mut self, key: StackKey, slot: u64, target: impl FnOnce() -> u64) {
        let frames = self.stack(key);
        let pushed_to_slot = frames
            .iter()
            .rev()
            .take_while(|f| f.slot <= slot)
            .any(|f| f.slot == slot);
        drop_below(frames, slot.wrapping_add(1));
        if !pushed_to_slot && frames.last().is_some_and(|f| f.ret == target()) {
            frames.pop();
        }
    }

    /// An `iret` back to kernel code whose stack pointer is `rsp`: its stack runs again,
    /// without the frames below `rsp` (an entry's calls that never returned on it). A leaf
    /// the interrupt came into (a copy loop) makes no call or return that would say so, and
    /// its stores would otherwise take the interrupt stack's frames.
    pub fn resume_kernel(&mut self, rsp: u64) {
        let frames = self.stack(StackKey::kernel(rsp));
        drop_below(frames, rsp);
    }

    /// The return addresses of the live frames at stack pointer `rsp`, innermost first.
    pub fn current(&mut self, key: StackKey, rsp: u64) -> Vec<u64> {
        let frames = self.stack(key);
        drop_below(frames, rsp);
        innermost_first(frames)
    }

    /// The return addresses of the frames the last call or return left live, innermost
    /// first, if it was on a kernel stack. Kernel functions are entered by a call and left
    /// by a ret, and what moves the stack pointer between them (pushes, interrupts and
    /// context switches, which come back to it) ends no frame (a return address moved
    /// before its `ret` is handled there), so these are the frames of the code running
    /// now, without reading its stack pointer. None for the kernel code
    /// between an entry from user mode and its first call, which stores no PM.
    pub fn latest_kernel(&self) -> Vec<u64> {
        match self.key {
            StackKey::Kernel(_) => innermost_first(&self.frames),
            StackKey::User { .. } => Vec::new(),
        }
    }

    fn stack(&mut self, key: StackKey) -> &mut Vec<Frame> {
        if key != self.key {
            let frames = self.others.remove(&key).unwrap_or_default();
            let previous = std::mem::replace(&mut self.frames, frames);
            if !previous.is_empty() {
                self.others.insert(self.key, previous);
            }
            self.key = key;
        }
        &mut self.frames
    }
}

fn innermost_first(frames: &[Frame]) -> Vec<u64> {
    frames.iter().rev().take(MAX_DEPTH).map(|f| f.ret).collect()
}

/// Drops the innermost frames whose slot is below `limit` (the stack grows down).
fn drop_below(frames: &mut Vec<Frame>, limit: u64) {
    while frames.last().is_some_and(|f| f.slot < limit) {
        frames.pop();
    }
}

/// The return addresses of the frame chain starting at `rbp`, innermost first. Each frame
/// holds the caller's rbp at `[rbp]` and the return address at `[rbp + 8]`;
/// `read_frame(rbp)` reads both. Code built without frame pointers leaves any value in
/// rbp, so the walk stops at the first frame that cannot be read, is misaligned, returns
/// to address 0, or whose caller's frame is not higher up the same stack half (user or
/// kernel).
pub fn walk(rbp: u64, mut read_frame: impl FnMut(u64) -> Option<(u64, u64)>) -> Vec<u64> {
    let mut stack = Vec::new();
    let mut frame = rbp;
    while stack.len() < MAX_DEPTH && frame != 0 && frame.is_multiple_of(8) {
        let Some((caller_frame, ret)) = read_frame(frame) else {
            break;
        };
        if ret == 0 {
            break;
        }
        stack.push(ret);
        let same_half = (caller_frame ^ frame) >> 63 == 0;
        if caller_frame <= frame || !same_half {
            break;
        }
        frame = caller_frame;
    }
    stack
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: StackKey = StackKey::Kernel(1);
    const TOP: u64 = 0xffff_c900_0000_8000;

    #[test]
    fn calls_push_and_returns_pop() {
        let mut s = ShadowStacks::default();
        s.call(K, TOP, 0xa); // slot TOP-8
        s.call(K, TOP - 0x20, 0xb); // slot TOP-0x28
        assert_eq!(s.current(K, TOP - 0x40), [0xb, 0xa]);
        s.ret(K, TOP - 0x28, || 0xb);
        assert_eq!(s.current(K, TOP - 0x20), [0xa]);
        s.call(K, TOP - 0x30, 0xc);
        assert_eq!(s.current(K, TOP - 0x38), [0xc, 0xa]);
        s.ret(K, TOP - 0x38, || 0xc);
        s.ret(K, TOP - 8, || 0xa);
        assert!(s.current(K, TOP).is_empty());
    }

    #[test]
    fn frames_below_the_stack_pointer_are_dead_without_a_ret() {
        // A retpoline thunk's inner call never returns to its slot, a longjmp or an
        // exception unwinds several frames: the stack pointer says which frames live.
        let mut s = ShadowStacks::default();
        s.call(K, TOP, 0xa);
        s.call(K, TOP - 0x20, 0xb);
        s.call(K, TOP - 0x40, 0xc);
        assert_eq!(s.current(K, TOP - 0x20), [0xa]);
        // A call at a higher stack pointer than recorded frames replaces them.
        s.call(K, TOP - 0x40, 0xb);
        s.call(K, TOP - 0x60, 0xc);
        s.call(K, TOP - 0x30, 0xd);
        assert_eq!(s.current(K, TOP - 0x40), [0xd, 0xa]);
    }

    #[test]
    fn a_ret_drops_the_frame_even_when_the_function_then_pushes_again() {
        // After `ret`, the caller may push below the returned frame's slot: without the
        // ret the dead frame would look live again.
        let mut s = ShadowStacks::default();
        s.call(K, TOP, 0xa);
        s.call(K, TOP - 0x20, 0xb);
        s.ret(K, TOP - 0x28, || 0xb);
        assert_eq!(s.current(K, TOP - 0x30), [0xa]);
    }

    #[test]
    fn stacks_are_kept_apart_and_calls_seen_before_are_missing_not_wrong() {
        let mut s = ShadowStacks::default();
        let other = StackKey::kernel(TOP + 0x10000);
        let user = StackKey::User {
            cr3: 0x1000,
            fs_base: 0x7000,
        };
        s.call(K, TOP, 0xa);
        s.call(other, TOP + 0x10000, 0xb);
        s.call(user, 0x7fff_0000, 0xc);
        assert_eq!(s.current(K, TOP - 8), [0xa]);
        assert_eq!(s.current(other, TOP + 0xfff8), [0xb]);
        assert_eq!(s.current(user, 0x7ffe_fff8), [0xc]);
        // Returning through a frame called before tracing started (above every recorded
        // one) ends all the frames inside it.
        s.ret(K, TOP + 0x100, || 0x999);
        assert!(s.current(K, TOP).is_empty());
        assert_eq!(StackKey::kernel(TOP), StackKey::kernel(TOP + 0x3fff));
        assert_ne!(StackKey::kernel(TOP), StackKey::kernel(TOP + 0x4000));
    }

    #[test]
    fn a_return_address_moved_down_before_the_ret_ends_its_frame() {
        // An interrupt in f: the entry code calls error_entry (slot TOP-0x48), which
        // pushes the registers under its return address and moves it down (to
        // TOP-0xc0) before returning. Without the rule the frame outlives the interrupt:
        // f's stores would show the entry code as their caller.
        let mut s = ShadowStacks::default();
        s.call(K, TOP, 0xa);
        s.call(K, TOP - 0x40, 0xe);
        s.ret(K, TOP - 0xc0, || 0xe);
        assert_eq!(s.latest_kernel(), [0xa]);
        // A return through an unrecorded slot to another address ends nothing more.
        s.call(K, TOP - 0x40, 0xe);
        s.ret(K, TOP - 0xc0, || 0x999);
        assert_eq!(s.latest_kernel(), [0xe, 0xa]);
    }

    #[test]
    fn recursion_returns_one_frame_at_a_time() {
        // f calls itself: both inner frames return to the same address.
        let mut s = ShadowStacks::default();
        s.call(K, TOP, 0xa);
        s.call(K, TOP - 0x20, 0xf);
        s.call(K, TOP - 0x40, 0xf);
        s.ret(K, TOP - 0x48, || 0xf);
        assert_eq!(s.latest_kernel(), [0xf, 0xa]);
        s.ret(K, TOP - 0x28, || 0xf);
        assert_eq!(s.latest_kernel(), [0xa]);
    }

    #[test]
    fn the_latest_kernel_stack_needs_no_stack_pointer() {
        let mut s = ShadowStacks::default();
        assert!(s.latest_kernel().is_empty());
        s.call(K, TOP, 0xa);
        s.call(K, TOP - 0x20, 0xb);
        s.call(K, TOP - 0x40, 0xc);
        s.ret(K, TOP - 0x48, || 0xc);
        // In b after c returned: what reading rsp would give.
        assert_eq!(s.latest_kernel(), [0xb, 0xa]);
        assert_eq!(s.latest_kernel(), s.current(K, TOP - 0x30));
        // An interrupt's handler on another kernel stack, then the return to b's stack.
        let irq = StackKey::kernel(TOP + 0x10000);
        s.call(irq, TOP + 0x10000, 0xd);
        assert_eq!(s.latest_kernel(), [0xd]);
        s.ret(irq, TOP + 0xfff8, || 0xd);
        s.ret(K, TOP - 0x28, || 0xb);
        assert_eq!(s.latest_kernel(), [0xa]);
        // An interrupt inside a leaf, whose entry left a frame below the interrupted stack
        // pointer: the iret back resumes the leaf's stack, without that frame.
        let task = StackKey::kernel(TOP - 8);
        s.call(task, TOP - 0x10, 0xa);
        s.call(task, TOP - 0x20, 0xb);
        s.call(task, TOP - 0x60, 0xe);
        s.call(irq, TOP + 0x10000, 0xd);
        assert_eq!(s.latest_kernel(), [0xd]);
        s.resume_kernel(TOP - 0x50);
        assert_eq!(s.latest_kernel(), [0xb, 0xa]);
        // A user stack's frames are never a kernel stack trace.
        let user = StackKey::User {
            cr3: 0x1000,
            fs_base: 0x7000,
        };
        s.call(user, 0x7fff_0000, 0xe);
        assert!(s.latest_kernel().is_empty());
    }

    #[test]
    fn shadow_stacks_are_depth_limited_innermost_first() {
        let mut s = ShadowStacks::default();
        for i in 0..40 {
            s.call(K, TOP - i * 16, 0x400000 + i);
        }
        let stack = s.current(K, TOP - 40 * 16);
        assert_eq!(stack.len(), MAX_DEPTH);
        assert_eq!(stack[..2], [0x400027, 0x400026]);
    }

    /// Guest memory holding frames: address -> (saved rbp, return address).
    fn memory(frames: &[(u64, u64, u64)]) -> impl FnMut(u64) -> Option<(u64, u64)> {
        let frames: HashMap<u64, (u64, u64)> = frames
            .iter()
            .map(|&(at, rbp, ret)| (at, (rbp, ret)))
            .collect();
        move |at| frames.get(&at).copied()
    }

    #[test]
    fn follows_the_chain_up_to_the_outermost_frame() {
        let mem = memory(&[
            (0x7ff0_0000, 0x7ff0_0040, 0x401010),
            (0x7ff0_0040, 0x7ff0_0100, 0x402020),
            (0x7ff0_0100, 0, 0x403030),
        ]);
        assert_eq!(walk(0x7ff0_0000, mem), [0x401010, 0x402020, 0x403030]);
    }

    #[test]
    fn stops_at_garbage() {
        // Unreadable, misaligned or null frames give nothing.
        assert!(walk(0x1234_5678, memory(&[])).is_empty());
        assert!(walk(0x7ff0_0004, memory(&[(0x7ff0_0004, 0, 1)])).is_empty());
        assert!(walk(0, memory(&[(0, 0x10, 1)])).is_empty());
        // A caller frame below the current one, or in the other half, ends the walk after
        // the current frame's return address.
        let down = memory(&[(0x7ff0_0100, 0x7ff0_0000, 0x401010), (0x7ff0_0000, 0, 7)]);
        assert_eq!(walk(0x7ff0_0100, down), [0x401010]);
        let kernel = 0xffff_c900_0000_0000;
        let across = memory(&[(0x7ff0_0100, kernel, 0x401010), (kernel, 0, 7)]);
        assert_eq!(walk(0x7ff0_0100, across), [0x401010]);
        // A null return address is not a frame.
        assert!(walk(0x7ff0_0000, memory(&[(0x7ff0_0000, 0x7ff0_0040, 0)])).is_empty());
    }

    #[test]
    fn is_depth_limited() {
        let frames: Vec<(u64, u64, u64)> = (0..40u64)
            .map(|i| (0x1000 + i * 16, 0x1000 + (i + 1) * 16, 0x400000 + i))
            .collect();
        let stack = walk(0x1000, memory(&frames));
        assert_eq!(stack.len(), MAX_DEPTH);
        assert_eq!(stack[..3], [0x400000, 0x400001, 0x400002]);
    }
}
