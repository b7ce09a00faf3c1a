//! x86-64 PM access: non-temporal stores of three widths, and cached stores with each of
//! the three flush instructions. Every type can only be constructed on a CPU that has its
//! instructions, which is what makes calling them sound.

use std::arch::asm;
use std::arch::x86_64::{
    __cpuid, __cpuid_count, __m128i, __m256i, __m512i, _mm256_loadu_si256, _mm256_stream_si256,
    _mm512_loadu_si512, _mm512_stream_si512, _mm_clflush, _mm_loadu_si128, _mm_sfence,
    _mm_stream_si128,
};

use super::{for_each_line, PmAccess};
use crate::layout::LINE;

/// Leaf 7 `ebx` bits of the cache-line write-back instructions.
const CPUID7_EBX_CLFLUSHOPT: u32 = 1 << 23;
const CPUID7_EBX_CLWB: u32 = 1 << 24;
/// Leaf 1 `edx` bit of `clflush`.
const CPUID1_EDX_CLFLUSH: u32 = 1 << 19;

// `__cpuid` became a safe function in newer Rust releases; older ones need the block.
#[allow(unused_unsafe)]
fn cpuid7_ebx() -> u32 {
    // SAFETY: `cpuid` exists on every x86-64 CPU; leaf 7 is only read when the CPU has it.
    unsafe {
        if __cpuid(0).eax < 7 {
            return 0;
        }
        __cpuid_count(7, 0).ebx
    }
}

#[allow(unused_unsafe)]
fn cpuid1_edx() -> u32 {
    // SAFETY: `cpuid` leaf 1 exists on every x86-64 CPU.
    unsafe { __cpuid(1).edx }
}

fn sfence() {
    // SAFETY: SSE is part of x86-64.
    #[allow(unused_unsafe)]
    unsafe {
        _mm_sfence()
    }
}

macro_rules! access_type {
    ($(#[$doc:meta])* $name:ident, $supported:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name(());

        impl $name {
            /// The access, if this CPU supports it.
            pub fn new() -> Option<Self> {
                ($supported).then_some($name(()))
            }
        }
    };
}

access_type!(
    /// 16-byte non-temporal stores (`movntdq`, SSE2: every x86-64 CPU) and `sfence`.
    NtSse2,
    true
);
access_type!(
    /// 32-byte non-temporal stores (`vmovntdq`, AVX2) and `sfence`.
    NtAvx2,
    is_x86_feature_detected!("avx2")
);
access_type!(
    /// 64-byte non-temporal stores (`vmovntdq zmm`, AVX-512F) and `sfence`.
    NtAvx512,
    is_x86_feature_detected!("avx512f")
);
access_type!(
    /// Cached stores, `clwb` of every line (keeps it cached) and `sfence`.
    Clwb,
    cpuid7_ebx() & CPUID7_EBX_CLWB != 0
);
access_type!(
    /// Cached stores, `clflushopt` of every line (evicts it) and `sfence`.
    Clflushopt,
    cpuid7_ebx() & CPUID7_EBX_CLFLUSHOPT != 0
);
access_type!(
    /// Cached stores and `clflush` of every line, the last resort: `clflush` is ordered with
    /// other flushes and so serialises them.
    Clflush,
    cpuid1_edx() & CPUID1_EDX_CLFLUSH != 0
);

// The `store_*` functions below are only called through the access types, whose
// existence proves the CPU feature; `dst` is line-aligned (the `PmAccess::store` contract),
// which the aligned stream instructions require.

#[target_feature(enable = "sse2")]
unsafe fn store_nt_sse2(dst: *mut u8, src: &[u8]) {
    for_each_line(src, |at, line| {
        for part in 0..LINE / 16 {
            // SAFETY: in-bounds of `line` and of the destination line, 16-byte aligned.
            unsafe {
                let value = _mm_loadu_si128(line.as_ptr().add(part * 16).cast::<__m128i>());
                _mm_stream_si128(dst.add(at + part * 16).cast::<__m128i>(), value);
            }
        }
    });
}

#[target_feature(enable = "avx,avx2")]
unsafe fn store_nt_avx2(dst: *mut u8, src: &[u8]) {
    for_each_line(src, |at, line| {
        for part in 0..LINE / 32 {
            // SAFETY: in-bounds of `line` and of the destination line, 32-byte aligned.
            unsafe {
                let value = _mm256_loadu_si256(line.as_ptr().add(part * 32).cast::<__m256i>());
                _mm256_stream_si256(dst.add(at + part * 32).cast::<__m256i>(), value);
            }
        }
    });
}

#[target_feature(enable = "avx512f")]
unsafe fn store_nt_avx512(dst: *mut u8, src: &[u8]) {
    for_each_line(src, |at, line| {
        // SAFETY: one whole, 64-byte aligned destination line.
        unsafe {
            let value = _mm512_loadu_si512(line.as_ptr().cast::<__m512i>());
            _mm512_stream_si512(dst.add(at).cast::<__m512i>(), value);
        }
    });
}

/// Cached stores, each line flushed by `flush` once it is written.
#[inline(always)]
unsafe fn store_and_flush(dst: *mut u8, src: &[u8], flush: impl Fn(*mut u8)) {
    for_each_line(src, |at, line| {
        // SAFETY: one whole destination line, guaranteed by the caller.
        let target = unsafe { dst.add(at) };
        // SAFETY: as above; a line-aligned `[u8; LINE]` has alignment 1.
        unsafe { target.cast::<[u8; LINE]>().write(*line) };
        flush(target);
    });
}

impl PmAccess for NtSse2 {
    #[inline(always)]
    unsafe fn xor_part(&self, base: *mut u8, offset: usize, mask: &[u8]) {
        // Atomic XORs go through the cache: flushed, not streamed.
        // SAFETY: the caller guarantees the words; `clflush` is part of x86-64.
        unsafe {
            super::xor_words(base.add(offset), mask);
            _mm_clflush(base.add(offset / LINE * LINE));
        }
    }
    #[inline(always)]
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: SSE2 is part of x86-64; the destination is the caller's promise.
        unsafe { store_nt_sse2(base.add(offset), src) }
    }
    #[inline(always)]
    fn fence(&self) {
        sfence();
    }
}

impl PmAccess for NtAvx2 {
    #[inline(always)]
    unsafe fn xor_part(&self, base: *mut u8, offset: usize, mask: &[u8]) {
        // Atomic XORs go through the cache: flushed, not streamed.
        // SAFETY: the caller guarantees the words; `clflush` is part of x86-64.
        unsafe {
            super::xor_words(base.add(offset), mask);
            _mm_clflush(base.add(offset / LINE * LINE));
        }
    }
    #[inline(always)]
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: `self` exists only if the CPU has AVX2; the destination is the caller's.
        unsafe { store_nt_avx2(base.add(offset), src) }
    }
    #[inline(always)]
    fn fence(&self) {
        sfence();
    }
}

impl PmAccess for NtAvx512 {
    #[inline(always)]
    unsafe fn xor_part(&self, base: *mut u8, offset: usize, mask: &[u8]) {
        // Atomic XORs go through the cache: flushed, not streamed.
        // SAFETY: the caller guarantees the words; `clflush` is part of x86-64.
        unsafe {
            super::xor_words(base.add(offset), mask);
            _mm_clflush(base.add(offset / LINE * LINE));
        }
    }
    #[inline(always)]
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: `self` exists only if the CPU has AVX-512F; the destination is the caller's.
        unsafe { store_nt_avx512(base.add(offset), src) }
    }
    #[inline(always)]
    fn fence(&self) {
        sfence();
    }
}

impl PmAccess for Clwb {
    #[inline(always)]
    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: as for `store`; the bytes lie in one line, flushed whole.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len());
            let line = base.add(offset / LINE * LINE);
            asm!("clwb [{}]", in(reg) line, options(nostack, preserves_flags));
        }
    }
    #[inline(always)]
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: `self` exists only if the CPU has `clwb`; the lines are the caller's.
        unsafe {
            store_and_flush(
                base.add(offset),
                src,
                |line| asm!("clwb [{}]", in(reg) line, options(nostack, preserves_flags)),
            )
        }
    }
    #[inline(always)]
    fn fence(&self) {
        sfence();
    }
}

impl PmAccess for Clflushopt {
    #[inline(always)]
    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: as for `store`; the bytes lie in one line, flushed whole.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len());
            let line = base.add(offset / LINE * LINE);
            asm!("clflushopt [{}]", in(reg) line, options(nostack, preserves_flags));
        }
    }
    #[inline(always)]
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: `self` exists only if the CPU has `clflushopt`; the lines are the caller's.
        unsafe {
            store_and_flush(
                base.add(offset),
                src,
                |line| asm!("clflushopt [{}]", in(reg) line, options(nostack, preserves_flags)),
            )
        }
    }
    #[inline(always)]
    fn fence(&self) {
        sfence();
    }
}

impl PmAccess for Clflush {
    #[inline(always)]
    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: as for `store`; the bytes lie in one line, flushed whole.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len());
            let line = base.add(offset / LINE * LINE);
            asm!("clflush [{}]", in(reg) line, options(nostack, preserves_flags));
        }
    }
    #[inline(always)]
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: `self` exists only if the CPU has `clflush`; the lines are the caller's.
        unsafe { store_and_flush(base.add(offset), src, |line| _mm_clflush(line)) }
    }
    #[inline(always)]
    fn fence(&self) {
        sfence();
    }
}
