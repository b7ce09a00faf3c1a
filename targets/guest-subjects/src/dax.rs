//! Shared mappings of files on a DAX file system with `MAP_SYNC`: stores through them reach
//! PM directly, and the file system's metadata for the mapped blocks is durable before a
//! write fault returns.

use persim_ringbuf::Region;
use std::fs::File;
use std::os::fd::AsRawFd;

/// `len` bytes of a file mapped with `MAP_SHARED_VALIDATE | MAP_SYNC`, unmapped on drop.
pub struct SyncMapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned; the pointer is only handed out raw.
unsafe impl Send for SyncMapping {}
// SAFETY: shared access hands out the raw pointer only.
unsafe impl Sync for SyncMapping {}

impl SyncMapping {
    /// Maps the first `len` bytes of `file`, which must lie on a file system mounted with
    /// `-o dax` (the kernel refuses `MAP_SYNC` elsewhere).
    pub fn new(file: &File, len: usize) -> Result<SyncMapping, String> {
        // SAFETY: a fresh shared mapping of an open file; checked for failure below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!(
                "mmap with MAP_SYNC: {} (is the file system mounted with -o dax?)",
                std::io::Error::last_os_error()
            ));
        }
        Ok(SyncMapping {
            ptr: ptr.cast(),
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Writes one byte of every page (its current value), so that the write faults, and
    /// the file-system metadata they update, happen now rather than later.
    pub fn prefault(&self) {
        for page in (0..self.len).step_by(4096) {
            // SAFETY: `page` lies inside the mapping, which is readable and writable.
            unsafe {
                let byte = self.ptr.add(page);
                byte.write_volatile(byte.read_volatile());
            }
        }
    }
}

impl Drop for SyncMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// SAFETY: the mapping stays at the same address for as long as the value lives.
unsafe impl Region for SyncMapping {
    fn base(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// Maps the whole file at `path` (on a DAX file system). Its pages are faulted in and the
/// metadata those faults touch (timestamps) is synced here, so that nothing but the
/// program's own stores happens between the checkpoints that follow.
pub fn map_file(path: &str) -> Result<SyncMapping, String> {
    map(open_file(path, false)?, path)
}

/// Creates the file at `path` with `len` zero bytes written and durable, so that stores
/// through the mapping never allocate, and maps it as [`map_file`] does.
pub fn create_mapped(path: &str, len: usize) -> Result<SyncMapping, String> {
    let file = open_file(path, true)?;
    std::io::Write::write_all(&mut &file, &vec![0; len])
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("writing {path}: {e}"))?;
    map(file, path)
}

fn open_file(path: &str, create: bool) -> Result<File, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(create)
        .open(path)
        .map_err(|e| format!("opening {path}: {e}"))
}

/// The mapping outlives `file`: the kernel keeps the file open while it is mapped.
fn map(file: File, path: &str) -> Result<SyncMapping, String> {
    let len = file
        .metadata()
        .map_err(|e| format!("reading {path}: {e}"))?
        .len() as usize;
    let mapping = SyncMapping::new(&file, len)?;
    mapping.prefault();
    file.sync_all()
        .map_err(|e| format!("syncing {path}: {e}"))?;
    Ok(mapping)
}
