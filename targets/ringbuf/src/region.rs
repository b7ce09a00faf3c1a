//! The memory a ring buffer lives in: a mapped file or device, or a heap buffer.

use std::alloc::{self, Layout};
use std::fs::File;
use std::io;
use std::ptr::NonNull;

use memmap2::MmapMut;

/// A contiguous, writable memory range that stays at the same address while it lives.
///
/// # Safety
///
/// `base()` must point to `len()` bytes that are valid for reads and writes for as long as
/// the value lives, and `base()` must return the same pointer every time. The ring buffer
/// writes through that pointer from several threads, to disjoint bytes.
pub unsafe trait Region: Send + Sync {
    fn base(&self) -> *mut u8;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Page alignment of [`HeapRegion`]s, like a mapping's.
const HEAP_ALIGN: usize = 4096;

/// A zero-filled, page-aligned heap buffer: a DRAM stand-in for PM in tests and benchmarks.
pub struct HeapRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is owned and only reached through the pointer, like a `Box<[u8]>`.
unsafe impl Send for HeapRegion {}
// SAFETY: shared access hands out the raw pointer only; `Region` users write disjoint bytes.
unsafe impl Sync for HeapRegion {}

impl HeapRegion {
    /// Allocates `len` zero bytes aligned to a page.
    ///
    /// # Panics
    ///
    /// If `len` exceeds `isize::MAX` rounded down to a page, like `Vec::with_capacity`.
    pub fn new(len: usize) -> Self {
        let Some(layout) = Self::layout(len) else {
            // Nothing to allocate; still a page-aligned address, like any other region.
            let ptr = std::ptr::without_provenance_mut(HEAP_ALIGN);
            return HeapRegion {
                ptr: NonNull::new(ptr).expect("non-zero"),
                len,
            };
        };
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        HeapRegion { ptr, len }
    }

    fn layout(len: usize) -> Option<Layout> {
        (len > 0).then(|| Layout::from_size_align(len, HEAP_ALIGN).expect("region too large"))
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocation holds `len` initialised bytes; `&self` excludes writers
        // because a ring buffer owns its region and gives it back only by value.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HeapRegion {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.len) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

// SAFETY: the allocation lives as long as the value and never moves.
unsafe impl Region for HeapRegion {
    fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// A shared, writable mapping of a file or device: an ordinary file for development, a
/// file on a DAX file system, or a device-DAX character device (`/dev/daxX.Y`).
pub struct MappedRegion {
    map: MmapMut,
    base: NonNull<u8>,
}

// SAFETY: the mapping is owned; the pointer is only a cached `map.as_mut_ptr()`.
unsafe impl Send for MappedRegion {}
// SAFETY: shared access hands out the raw pointer only; `Region` users write disjoint bytes.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// Maps the whole of `file` (its length as reported by the file system).
    ///
    /// # Safety
    ///
    /// Nothing else may truncate the file or write to the mapped range while the region
    /// lives, as for [`memmap2::MmapMut::map_mut`].
    pub unsafe fn map(file: &File) -> io::Result<Self> {
        // SAFETY: forwarded to the caller.
        Self::from_map(unsafe { MmapMut::map_mut(file)? })
    }

    /// Maps the first `len` bytes of `file`; for device-DAX, whose length the file system
    /// reports as 0 (read it from `/sys/bus/dax/devices/daxX.Y/size`).
    ///
    /// # Safety
    ///
    /// As for [`MappedRegion::map`].
    pub unsafe fn map_len(file: &File, len: usize) -> io::Result<Self> {
        // SAFETY: forwarded to the caller.
        Self::from_map(unsafe { memmap2::MmapOptions::new().len(len).map_mut(file)? })
    }

    fn from_map(mut map: MmapMut) -> io::Result<Self> {
        let base = NonNull::new(map.as_mut_ptr()).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the mapping is at address 0")
        })?;
        Ok(MappedRegion { map, base })
    }
}

// SAFETY: the mapping lives as long as the value and is never remapped.
unsafe impl Region for MappedRegion {
    fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}
