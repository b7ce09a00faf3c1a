//! A PM access that writes memory with plain stores and records, as Persim trace entries,
//! the stores, flushes and fences a hardware access of a chosen style would issue. The
//! crash model replays that trace to enumerate what a crash could leave.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use persim_trace::{Entry, FenceKind, FlushKind, Hypercall, Op};

use super::{for_each_line, PmAccess};
use crate::layout::LINE;

/// Which hardware access the trace imitates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceStyle {
    /// Non-temporal line stores, `sfence`.
    NonTemporal,
    /// Cached line stores, a `clwb` after each, `sfence`.
    Clwb,
    /// Cached line stores, `mfence` (persistent caches: no flushes).
    Eadr,
}

/// Records trace entries with addresses as offsets into the region.
///
/// Each store is recorded as one `write`/`ntwrite` per cache line (at most 64 bytes, never
/// crossing a line), which is how the stores reach the memory system.
#[derive(Debug)]
pub struct Tracing {
    style: TraceStyle,
    checkpoints: bool,
    next_checkpoint: AtomicU64,
    entries: Mutex<Vec<Entry>>,
}

impl Tracing {
    /// A tracer of `style`; with `checkpoints`, each append is preceded and followed by a
    /// `hypercall checkpoint N`, N counting up from 0 across the run.
    pub fn new(style: TraceStyle, checkpoints: bool) -> Self {
        Tracing {
            style,
            checkpoints,
            next_checkpoint: AtomicU64::new(0),
            entries: Mutex::new(Vec::new()),
        }
    }

    pub fn style(&self) -> TraceStyle {
        self.style
    }

    /// Returns the entries recorded so far and starts a new trace.
    pub fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // A panic elsewhere while recording leaves a complete entry list: keep using it.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PmAccess for Tracing {
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        let nt = self.style == TraceStyle::NonTemporal;
        let mut entries = self.lock();
        for_each_line(src, |at, line| {
            // SAFETY: the caller guarantees the destination lines.
            unsafe { base.add(offset + at).cast::<[u8; LINE]>().write(*line) };
            let addr = (offset + at) as u64;
            entries.push(
                Op::Write {
                    addr,
                    data: line.to_vec(),
                    nt,
                }
                .into(),
            );
            if self.style == TraceStyle::Clwb {
                entries.push(
                    Op::Flush {
                        kind: FlushKind::Clwb,
                        addr,
                    }
                    .into(),
                );
            }
        });
    }

    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        if self.style == TraceStyle::NonTemporal {
            // Non-temporal stores write whole lines: the line patched, as by default.
            let start = offset / LINE * LINE;
            // SAFETY: the caller guarantees the line.
            let mut line = unsafe { base.add(start).cast::<[u8; LINE]>().read() };
            line[offset - start..offset - start + src.len()].copy_from_slice(src);
            // SAFETY: as above.
            return unsafe { self.store(base, start, &line) };
        }
        // SAFETY: the caller guarantees the bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len()) };
        let mut entries = self.lock();
        let addr = offset as u64;
        entries.push(
            Op::Write {
                addr,
                data: src.to_vec(),
                nt: false,
            }
            .into(),
        );
        if self.style == TraceStyle::Clwb {
            entries.push(
                Op::Flush {
                    kind: FlushKind::Clwb,
                    addr: addr / LINE as u64 * LINE as u64,
                }
                .into(),
            );
        }
    }

    unsafe fn xor_part(&self, base: *mut u8, offset: usize, mask: &[u8]) {
        // Under the lock, so that the bytes recorded are what the words hold in trace
        // order. Atomic XORs go through the cache even when the style's stores do not.
        let mut entries = self.lock();
        // SAFETY: the caller guarantees the words.
        let data = unsafe {
            super::xor_words(base.add(offset), mask);
            std::slice::from_raw_parts(base.add(offset), mask.len()).to_vec()
        };
        let addr = offset as u64;
        entries.push(
            Op::Write {
                addr,
                data,
                nt: false,
            }
            .into(),
        );
        let kind = match self.style {
            TraceStyle::Eadr => return,
            TraceStyle::Clwb => FlushKind::Clwb,
            TraceStyle::NonTemporal => FlushKind::Clflush,
        };
        let addr = addr / LINE as u64 * LINE as u64;
        entries.push(Op::Flush { kind, addr }.into());
    }

    fn fence(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        let kind = match self.style {
            TraceStyle::NonTemporal | TraceStyle::Clwb => FenceKind::Sfence,
            TraceStyle::Eadr => FenceKind::Mfence,
        };
        self.lock().push(Op::Fence(kind).into());
    }

    fn append_boundary(&self) {
        if self.checkpoints {
            // Numbered under the lock so that numbers ascend in trace order.
            let mut entries = self.lock();
            let n = self.next_checkpoint.fetch_add(1, Ordering::Relaxed);
            entries.push(Op::Hypercall(Hypercall::Checkpoint(n)).into());
        }
    }
}
