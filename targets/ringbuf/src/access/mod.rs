//! How bytes reach persistent memory: the [`PmAccess`] trait, its implementations and the
//! run-time choice among them.
//!
//! The ring buffer is generic over its access type, so every store of the hot path is a
//! direct, inlinable call. The choice by CPU features happens once, in [`dispatch`], which
//! hands a concrete access value to an [`AccessVisitor`].

#[cfg(feature = "trace")]
mod tracing;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(feature = "trace")]
pub use tracing::{TraceStyle, Tracing};
#[cfg(target_arch = "x86_64")]
pub use x86::{Clflush, Clflushopt, Clwb, NtAvx2, NtAvx512, NtSse2};

use crate::layout::LINE;
use strum::{EnumString, IntoStaticStr, VariantNames};

/// Writes to persistent memory and orders them.
///
/// Stores cover whole cache lines: `store` writes `src` and fills the rest of its last line
/// with zeros, so that non-temporal stores never leave a partly written line in a
/// write-combining buffer and every traced store stays within one line.
pub trait PmAccess: Send + Sync {
    /// Stores `src` at `base + offset` and zeros up to the end of the last line touched.
    /// The bytes are durable after the next [`PmAccess::fence`], not before.
    ///
    /// # Safety
    ///
    /// `offset` is a multiple of [`LINE`], `base` is line-aligned, and the lines
    /// `base + offset .. base + offset + src.len()` (rounded up to a line) are valid for
    /// writes and written by no one else until the call returns.
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]);

    /// Stores `src` at `base + offset`, inside one line, leaving the line's other bytes as
    /// they are: an update stores only the bytes it changes. Durable after the next fence.
    /// By default the whole line is stored (read, patched, and stored with `store`).
    ///
    /// # Safety
    ///
    /// `base` is line-aligned, `offset .. offset + src.len()` lies in one line, and that
    /// line is valid for reads and writes and written by no one else until the call returns.
    #[inline(always)]
    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        let start = offset / LINE * LINE;
        // SAFETY: the caller guarantees the line.
        let mut line = unsafe { base.add(start).cast::<[u8; LINE]>().read() };
        line[offset - start..offset - start + src.len()].copy_from_slice(src);
        // SAFETY: as above; `start` is line-aligned.
        unsafe { self.store(base, start, &line) }
    }

    /// XORs `mask` into the bytes at `base + offset` (8-aligned, a multiple of 8 long, in
    /// one line) a word at a time with atomic XORs, so that threads updating the same words
    /// lose none of each other's changes (parity shared by several writers). Durable after
    /// the next fence. By default the words are XORed in the cache, then the line is
    /// flushed by an empty `store_part`: types whose `store_part` reads and rewrites the
    /// line (non-temporal ones) override this.
    ///
    /// # Safety
    ///
    /// `base` is line-aligned, `offset .. offset + mask.len()` lies in one line, 8-aligned,
    /// valid for reads and writes, and written by others only through this method.
    #[inline(always)]
    unsafe fn xor_part(&self, base: *mut u8, offset: usize, mask: &[u8]) {
        // SAFETY: the caller guarantees the words.
        unsafe {
            xor_words(base.add(offset), mask);
            self.store_part(base, offset, &[]);
        }
    }

    /// Makes every earlier store durable before any later one.
    fn fence(&self);

    /// Called when an append begins and once it is durable. Only tracing uses it.
    #[inline(always)]
    fn append_boundary(&self) {}
}

/// XORs `mask` into the 8-aligned words at `dst` with atomic XORs.
///
/// # Safety
///
/// `dst` is 8-aligned and `dst .. dst + mask.len()` is valid for reads and writes, written
/// concurrently only by atomic operations.
#[inline(always)]
pub(crate) unsafe fn xor_words(dst: *mut u8, mask: &[u8]) {
    use std::sync::atomic::{AtomicU64, Ordering};
    for (k, word) in mask.chunks_exact(8).enumerate() {
        let word = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        if word != 0 {
            // SAFETY: aligned and valid (the caller's promise); the word is only written
            // atomically while this runs.
            unsafe { AtomicU64::from_ptr(dst.add(8 * k).cast()) }
                .fetch_xor(word, Ordering::Relaxed);
        }
    }
}

/// Calls `store_line(offset, line)` for each line of `src` in order, the last one padded
/// with zeros.
#[inline(always)]
pub(crate) fn for_each_line(src: &[u8], mut store_line: impl FnMut(usize, &[u8; LINE])) {
    let mut lines = src.chunks_exact(LINE);
    for (index, line) in lines.by_ref().enumerate() {
        store_line(
            index * LINE,
            line.try_into().expect("chunks_exact yields whole lines"),
        );
    }
    let rest = lines.remainder();
    if !rest.is_empty() {
        let mut last = [0; LINE];
        last[..rest.len()].copy_from_slice(rest);
        store_line(src.len() - rest.len(), &last);
    }
}

/// Cached stores with no flushes: for platforms whose caches are persistent (eADR), where a
/// store is durable once it leaves the store buffer. The fence drains the store buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Eadr;

impl PmAccess for Eadr {
    #[inline(always)]
    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: the caller guarantees the bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len()) }
    }

    #[inline(always)]
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        for_each_line(src, |at, line| {
            // SAFETY: the caller guarantees the destination lines.
            unsafe { base.add(offset + at).cast::<[u8; LINE]>().write(*line) }
        });
    }

    #[inline(always)]
    fn fence(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// How an access makes stores durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Non-temporal stores that bypass the cache, then `sfence`.
    NonTemporal,
    /// Cached stores, a flush of every line, then `sfence`.
    Flush,
    /// Cached stores on persistent caches (eADR): no flushes.
    Eadr,
}

/// Every hardware access implementation, for choosing one at run time (`ringbuf-tool
/// --access`, benchmark names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "kebab-case")]
pub enum AccessKind {
    NtAvx512,
    NtAvx2,
    NtSse2,
    Clwb,
    Clflushopt,
    Clflush,
    Eadr,
}

impl AccessKind {
    /// All kinds, the preferred one of each strategy first.
    pub const ALL: [AccessKind; 7] = [
        AccessKind::NtAvx512,
        AccessKind::NtAvx2,
        AccessKind::NtSse2,
        AccessKind::Clwb,
        AccessKind::Clflushopt,
        AccessKind::Clflush,
        AccessKind::Eadr,
    ];

    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn strategy(self) -> Strategy {
        match self {
            AccessKind::NtAvx512 | AccessKind::NtAvx2 | AccessKind::NtSse2 => Strategy::NonTemporal,
            AccessKind::Clwb | AccessKind::Clflushopt | AccessKind::Clflush => Strategy::Flush,
            AccessKind::Eadr => Strategy::Eadr,
        }
    }

    /// Whether this CPU has the instructions the kind needs.
    pub fn is_supported(self) -> bool {
        dispatch(self, Probe).is_ok()
    }

    /// The best supported kind of `strategy` on this CPU: the widest non-temporal stores,
    /// or the cheapest flush (`clwb`, then `clflushopt`, then `clflush`).
    pub fn detect(strategy: Strategy) -> Result<AccessKind, Unsupported> {
        AccessKind::ALL
            .into_iter()
            .find(|kind| kind.strategy() == strategy && kind.is_supported())
            .ok_or(Unsupported::Strategy(strategy))
    }
}

/// This CPU lacks what an access kind or strategy needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error(
        "this CPU lacks the instructions of the {} PM access; pick a kind for which \
         AccessKind::is_supported() is true",
        .0.name()
    )]
    Kind(AccessKind),
    #[error("this CPU supports no PM access of the {0:?} strategy; pick another strategy")]
    Strategy(Strategy),
}

/// Code to run with a concrete access type, chosen at run time by [`dispatch`].
pub trait AccessVisitor {
    type Output;
    fn visit<A: PmAccess + 'static>(self, access: A) -> Self::Output;
}

/// Constructs the access of `kind` and runs `visitor` with it, monomorphised for that type.
///
/// ```
/// use persim_ringbuf::{dispatch, AccessKind, AccessVisitor, HeapRegion, PmAccess, RingBuf, Strategy};
///
/// struct AppendOne;
/// impl AccessVisitor for AppendOne {
///     type Output = u64;
///     fn visit<A: PmAccess + 'static>(self, access: A) -> u64 {
///         let log = RingBuf::<_, _>::format(HeapRegion::new(1 << 20), access, 64 << 10, 2)
///             .expect("format");
///         log.append(b"hello").expect("append")
///     }
/// }
///
/// let kind = AccessKind::detect(Strategy::Eadr).expect("eADR needs no special instructions");
/// assert_eq!(dispatch(kind, AppendOne), Ok(1));
/// ```
pub fn dispatch<V: AccessVisitor>(kind: AccessKind, visitor: V) -> Result<V::Output, Unsupported> {
    #[cfg(target_arch = "x86_64")]
    let output = match kind {
        AccessKind::NtAvx512 => NtAvx512::new().map(|a| visitor.visit(a)),
        AccessKind::NtAvx2 => NtAvx2::new().map(|a| visitor.visit(a)),
        AccessKind::NtSse2 => NtSse2::new().map(|a| visitor.visit(a)),
        AccessKind::Clwb => Clwb::new().map(|a| visitor.visit(a)),
        AccessKind::Clflushopt => Clflushopt::new().map(|a| visitor.visit(a)),
        AccessKind::Clflush => Clflush::new().map(|a| visitor.visit(a)),
        AccessKind::Eadr => Some(visitor.visit(Eadr)),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let output = (kind == AccessKind::Eadr).then(|| visitor.visit(Eadr));
    output.ok_or(Unsupported::Kind(kind))
}

/// A visitor that does nothing: constructing the access is the support check.
struct Probe;

impl AccessVisitor for Probe {
    type Output = ();
    fn visit<A: PmAccess + 'static>(self, _: A) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_cover_the_source_and_pad_only_the_last() {
        for len in [0usize, 1, 63, 64, 65, 128, 200] {
            let src: Vec<u8> = (1..=len).map(|i| i as u8 | 1).collect();
            let mut seen = Vec::new();
            for_each_line(&src, |at, line| {
                assert_eq!(at, seen.len(), "lines arrive in order");
                seen.extend_from_slice(line);
            });
            assert_eq!(seen.len(), len.div_ceil(LINE) * LINE);
            assert_eq!(&seen[..len], &src[..]);
            assert!(seen[len..].iter().all(|&b| b == 0));
        }
    }

    /// A partial store changes its bytes only, in every access kind this CPU has; tracing
    /// records them alone (a flush of their line with clwb), non-temporal as a whole line.
    #[test]
    #[cfg(feature = "trace")]
    fn a_partial_store_changes_only_its_bytes() {
        struct Check;
        impl AccessVisitor for Check {
            type Output = ();
            fn visit<A: PmAccess + 'static>(self, access: A) {
                let mut line = Aligned([7; 2 * LINE]);
                // SAFETY: bytes 70..73 lie in the second line of `line`, which is ours.
                unsafe { access.store_part(line.0.as_mut_ptr(), 70, &[1, 2, 3]) };
                let mut want = [7; 2 * LINE];
                want[70..73].copy_from_slice(&[1, 2, 3]);
                assert_eq!(line.0, want);
            }
        }
        for kind in AccessKind::ALL.into_iter().filter(|k| k.is_supported()) {
            dispatch(kind, Check).unwrap();
        }
        for (style, want) in [
            (TraceStyle::Clwb, vec![(70, 3), (64, 0)]),
            (TraceStyle::Eadr, vec![(70, 3)]),
            (TraceStyle::NonTemporal, vec![(64, LINE)]),
        ] {
            let access = Tracing::new(style, false);
            let mut line = Aligned([7; 2 * LINE]);
            // SAFETY: as above.
            unsafe { access.store_part(line.0.as_mut_ptr(), 70, &[1, 2, 3]) };
            assert_eq!(line.0[69..74], [7, 1, 2, 3, 7]);
            let seen: Vec<(u64, usize)> = access
                .take()
                .into_iter()
                .map(|e| match e.op {
                    persim_trace::Op::Write { addr, data, .. } => (addr, data.len()),
                    persim_trace::Op::Flush { addr, .. } => (addr, 0),
                    op => panic!("{op:?}"),
                })
                .collect();
            let want: Vec<(u64, usize)> = want;
            assert_eq!(seen, want, "{style:?}");
        }
    }

    /// An XOR changes only its words, in every access kind this CPU has; tracing records
    /// the words' new bytes, and a flush of their line where the style flushes.
    #[test]
    #[cfg(feature = "trace")]
    fn an_xor_changes_only_its_words() {
        struct Check;
        impl AccessVisitor for Check {
            type Output = ();
            fn visit<A: PmAccess + 'static>(self, access: A) {
                let mut line = Aligned([7; 2 * LINE]);
                // SAFETY: bytes 72..88 lie in the second line of `line`, which is ours.
                unsafe { access.xor_part(line.0.as_mut_ptr(), 72, &[3; 16]) };
                let mut want = [7; 2 * LINE];
                want[72..88].fill(7 ^ 3);
                assert_eq!(line.0, want);
            }
        }
        for kind in AccessKind::ALL.into_iter().filter(|k| k.is_supported()) {
            dispatch(kind, Check).unwrap();
        }
        for (style, flush) in [
            (TraceStyle::Clwb, Some(persim_trace::FlushKind::Clwb)),
            (TraceStyle::Eadr, None),
            (
                TraceStyle::NonTemporal,
                Some(persim_trace::FlushKind::Clflush),
            ),
        ] {
            let access = Tracing::new(style, false);
            let mut line = Aligned([7; 2 * LINE]);
            // SAFETY: as above.
            unsafe { access.xor_part(line.0.as_mut_ptr(), 72, &[1; 8]) };
            let trace = access.take();
            assert!(
                matches!(&trace[0].op, persim_trace::Op::Write { addr: 72, data, nt: false } if data == &[6; 8]),
                "{style:?}: {trace:?}"
            );
            let flushed = trace.get(1).map(|e| match e.op {
                persim_trace::Op::Flush { kind, addr: 64 } => kind,
                ref op => panic!("{op:?}"),
            });
            assert_eq!(flushed, flush, "{style:?}");
        }
    }

    #[repr(align(64))]
    struct Aligned([u8; 2 * LINE]);

    #[test]
    fn eadr_is_always_available_and_detection_respects_the_strategy() {
        assert_eq!(AccessKind::detect(Strategy::Eadr), Ok(AccessKind::Eadr));
        for strategy in [Strategy::NonTemporal, Strategy::Flush] {
            if let Ok(kind) = AccessKind::detect(strategy) {
                assert_eq!(kind.strategy(), strategy);
                assert!(kind.is_supported());
            }
        }
    }

    /// Fails when a name `ringbuf-tool --access` takes changes, or a kind is missing from
    /// `ALL`.
    #[test]
    fn kinds_are_named_and_parsed() {
        let names: Vec<&str> = AccessKind::ALL.iter().map(|kind| kind.name()).collect();
        assert_eq!(AccessKind::VARIANTS, names);
        assert_eq!(
            names,
            [
                "nt-avx512",
                "nt-avx2",
                "nt-sse2",
                "clwb",
                "clflushopt",
                "clflush",
                "eadr"
            ]
        );
        for kind in AccessKind::ALL {
            assert_eq!(kind.name().parse(), Ok(kind));
        }
        assert!("avx512".parse::<AccessKind>().is_err());
    }
}
