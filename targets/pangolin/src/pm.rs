//! The pool's only way to PM: reads of the mapped bytes, and whole-line stores and fences
//! through a [`PmAccess`], which the crash model traces (persim-ringbuf's `Tracing`).

use persim_ringbuf::{PmAccess, Region};

use crate::layout::LINE;

/// A cache line of bytes.
pub type Line = [u8; LINE as usize];

pub struct Pm<R, A> {
    pub region: R,
    pub access: A,
}

impl<R: Region, A: PmAccess> Pm<R, A> {
    /// The `len` bytes at `at`. Threads share a pool: the caller reads only bytes no other
    /// thread stores meanwhile (its own objects, its lane, parity under its column lock).
    pub fn bytes(&self, at: u64, len: u64) -> &[u8] {
        assert!(at + len <= self.region.len() as u64, "a read past the pool");
        // SAFETY: in bounds (checked); the region lives as long as `self`; no thread stores
        // these bytes while the slice lives (the pool's locks and lanes, object isolation).
        unsafe { std::slice::from_raw_parts(self.region.base().add(at as usize), len as usize) }
    }

    pub fn line(&self, at: u64) -> Line {
        self.bytes(at, LINE).try_into().expect("one line")
    }

    /// Stores whole lines `bytes` at line-aligned `at`; durable after the next fence.
    pub fn store(&self, at: u64, bytes: &[u8]) {
        assert!(at.is_multiple_of(LINE) && (bytes.len() as u64).is_multiple_of(LINE));
        assert!(
            at + bytes.len() as u64 <= self.region.len() as u64,
            "a store past the pool"
        );
        // SAFETY: line-aligned (region bases are page-aligned), in bounds; the pool's locks,
        // lanes and object isolation make this the lines' only writer.
        unsafe { self.access.store(self.region.base(), at as usize, bytes) }
    }

    /// Stores `bytes` at `at`, all in one line.
    pub fn store_part(&self, at: u64, bytes: &[u8]) {
        assert!(
            at % LINE + bytes.len() as u64 <= LINE && at < self.region.len() as u64,
            "a partial store crosses a line or the pool's end"
        );
        // SAFETY: inside one line of the region (checked); the only writer, as in `store`.
        unsafe {
            self.access
                .store_part(self.region.base(), at as usize, bytes)
        }
    }

    /// XORs `mask` into the words at `at` (in one line) atomically: parity that threads
    /// holding its column shared update at once.
    pub fn xor_part(&self, at: u64, mask: &[u8]) {
        assert!(
            at.is_multiple_of(8) && at % LINE + mask.len() as u64 <= LINE,
            "an XOR of whole words in one line"
        );
        assert!(at < self.region.len() as u64, "an XOR past the pool");
        // SAFETY: whole words inside one line of the region (checked); other threads
        // write them only through `xor_part` (column locks shared) or hold the column
        // exclusively.
        unsafe { self.access.xor_part(self.region.base(), at as usize, mask) }
    }

    pub fn fence(&self) {
        self.access.fence();
    }
}
