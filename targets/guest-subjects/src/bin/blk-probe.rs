//! `blk-probe BLOCK_DEVICE PM_DEVICE`: a test program for the tracer's NVMe decoding
//! (crates/vm/tests/guest.rs). With direct I/O (no page cache, so each write is one
//! command at once) it runs a known sequence between hypercall checkpoints:
//!
//! - checkpoint 1 .. 2: a 12 KiB write at 64 KiB (three pages: PRP1 and a PRP list);
//! - checkpoint 2 .. 3: a 512-byte write to PM_DEVICE at 1 MiB, then a 4 KiB write at 0
//!   with `RWF_DSYNC` (Force Unit Access, and the kernel's flush after it);
//! - checkpoint 3 .. 4: a 4 KiB write at 8 KiB, then `fsync` (a flush command).
//!
//! The data of write k (1, 2, 3) is [`pattern`]`(k)`; the PM write's is `pattern(9)`.

use lexopt::Arg::{Short, Value};
use lexopt::ValueExt;
use persim_guest::command_line::parse_or_exit;
use persim_guest::hypercall::{call, Operation};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::ExitCode;

const USAGE: &str = "\
usage: blk-probe BLOCK_DEVICE PM_DEVICE

Writes known blocks to BLOCK_DEVICE (and 512 bytes to PM_DEVICE) with direct I/O, with and
without RWF_DSYNC, and flushes, between hypercall checkpoints 1 to 4, for the tracer tests.";

fn main() -> ExitCode {
    let (block, pm) = match parse_or_exit("blk-probe", USAGE, parse) {
        Ok(paths) => paths,
        Err(code) => return code,
    };
    match run(&block, &pm) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blk-probe: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<(String, String)>, String> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut paths = Vec::new();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | lexopt::Arg::Long("help") => return Ok(None),
            Value(path) if paths.len() < 2 => paths.push(path.string().map_err(|e| e.to_string())?),
            other => return Err(other.unexpected().to_string()),
        }
    }
    match <[String; 2]>::try_from(paths) {
        Ok([block, pm]) => Ok(Some((block, pm))),
        Err(_) => Err("give BLOCK_DEVICE and PM_DEVICE".into()),
    }
}

/// The bytes of write `k`: distinct per write and per byte, so a test tells them apart.
fn pattern(k: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ k).collect()
}

/// A page-aligned buffer, as direct I/O needs.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(data: &[u8]) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(data.len(), 4096).expect("valid layout");
        // SAFETY: a non-zero size; the buffer is filled before use and freed on drop.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null(), "out of memory");
        // SAFETY: `ptr` holds `data.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
        Aligned { ptr, layout }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: initialised in `new`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn open_direct(path: &str) -> Result<File, String> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| format!("{path}: {e}"))
}

fn write(file: &File, path: &str, offset: u64, data: &[u8]) -> Result<(), String> {
    let buffer = Aligned::new(data);
    file.write_all_at(buffer.bytes(), offset)
        .map_err(|e| format!("writing {} bytes at {offset:#x} of {path}: {e}", data.len()))
}

/// `pwritev2` with `RWF_DSYNC`: the write is durable when it returns.
fn write_dsync(file: &File, path: &str, offset: u64, data: &[u8]) -> Result<(), String> {
    let buffer = Aligned::new(data);
    let iov = libc::iovec {
        iov_base: buffer.ptr.cast(),
        iov_len: data.len(),
    };
    let offset = libc::off_t::try_from(offset).map_err(|e| e.to_string())?;
    // SAFETY: one iovec over a live buffer of its length.
    let n = unsafe { libc::pwritev2(file.as_raw_fd(), &iov, 1, offset, libc::RWF_DSYNC) };
    if n != data.len() as isize {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "pwritev2 RWF_DSYNC at {offset:#x} of {path}: {n}, {e}"
        ));
    }
    Ok(())
}

fn run(block: &str, pm: &str) -> Result<(), String> {
    let disk = open_direct(block)?;
    let pm_device = open_direct(pm)?;
    call(Operation::Checkpoint(1));
    write(&disk, block, 64 << 10, &pattern(1, 12 << 10))?;
    call(Operation::Checkpoint(2));
    write(&pm_device, pm, 1 << 20, &pattern(9, 512))?;
    write_dsync(&disk, block, 0, &pattern(2, 4096))?;
    call(Operation::Checkpoint(3));
    write(&disk, block, 8 << 10, &pattern(3, 4096))?;
    disk.sync_all().map_err(|e| format!("fsync {block}: {e}"))?;
    call(Operation::Checkpoint(4));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_guest::command_line::words;

    #[test]
    fn takes_two_devices() {
        assert_eq!(
            parse(words("/dev/nvme0n1 /dev/pmem0")),
            Ok(Some(("/dev/nvme0n1".into(), "/dev/pmem0".into())))
        );
        assert!(parse(words("/dev/nvme0n1")).is_err());
        assert_eq!(parse(words("--help")), Ok(None));
    }
}
