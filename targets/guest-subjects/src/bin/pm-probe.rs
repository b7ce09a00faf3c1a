//! `pm-probe FILE`: a test program for the tracer (crates/vm/tests/trace_probe.rs). It
//! creates FILE on a DAX file system, maps it with `MAP_SYNC`, and then executes a known
//! sequence of PM operations between hypercall checkpoints:
//!
//! - checkpoint 1 .. 2: `movnti` of 8 bytes at 0x00, cached stores of 8 bytes at 0x40 and
//!   2 bytes at 0x4a, `clwb` of 0x48, `clflushopt` of 0x10, `rep stosb` of 100 bytes 0x5a
//!   at 0x830, `sfence`;
//! - checkpoint 2 .. 3: a call chain `persim_probe_outer` → `_middle` → `_inner`: inner
//!   stores 8 bytes at 0x1000, middle then does `clwb` of 0x1000, outer `sfence` (the
//!   stack-trace test; built with frame pointers by scripts/setup.sh).
//!
//! Offsets are from the start of FILE. Before checkpoint 1 it prints `pm_offset=0x…`, the
//! PM offset of FILE's first byte (FIEMAP plus the pmem device's place in the NVDIMM
//! region), and `outer=0x…`, the run-time address of `persim_probe_outer` (static-pie
//! binaries are loaded at a random address).

use lexopt::Arg::{Long, Short, Value};
use lexopt::ValueExt;
use persim_guest::command_line::parse_or_exit;
use persim_guest::hypercall::{call, Operation};
use persim_subjects::dax::SyncMapping;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

const FILE_SIZE: usize = 2 * 4096;
/// The bytes each store writes; distinct so a test can tell the entries apart.
const NT_VALUE: u64 = 0x1122_3344_5566_7788;
const CACHED_VALUE: u64 = 0x0102_0304_0506_0708;
const CACHED_SHORT: u16 = 0xbeef;
const INNER_VALUE: u64 = 0xa1a2_a3a4_a5a6_a7a8;

const USAGE: &str = "\
usage: pm-probe FILE

Creates FILE (on a file system mounted with -o dax), maps it with MAP_SYNC and runs a known
sequence of PM operations between hypercall checkpoints 1, 2 and 3 for the tracer tests;
prints pm_offset=0x... and outer=0x... before checkpoint 1.";

fn main() -> ExitCode {
    let path = match parse_or_exit("pm-probe", USAGE, parse) {
        Ok(path) => path,
        Err(code) => return code,
    };
    match run(&path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pm-probe: {e}");
            ExitCode::FAILURE
        }
    }
}

/// FILE from the command line, or `None` for `--help`.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<String>, String> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut path = None;
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Value(file) if path.is_none() => {
                path = Some(file.string().map_err(|e| e.to_string())?);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    path.map(Some)
        .ok_or_else(|| "give the FILE to create".into())
}

fn run(path: &str) -> Result<(), String> {
    let file = create_written(path)?;
    let pm_offset = pm_offset(&file)?;
    let mapping = SyncMapping::new(&file, FILE_SIZE)?;
    // A first write fault under MAP_SYNC commits file-system metadata, which must not
    // happen between the checkpoints.
    mapping.prefault();
    let map = mapping.as_ptr();
    println!("pm_offset={pm_offset:#x}");
    println!("outer={:#x}", persim_probe_outer as *const () as usize);
    std::io::stdout()
        .flush()
        .map_err(|e| format!("stdout: {e}"))?;

    call(Operation::Checkpoint(1));
    // SAFETY: all offsets lie inside the mapping.
    unsafe {
        movnti(map.cast(), NT_VALUE);
        map.add(0x40).cast::<u64>().write_volatile(CACHED_VALUE);
        map.add(0x4a).cast::<u16>().write_volatile(CACHED_SHORT);
        clwb(map.add(0x48));
        clflushopt(map.add(0x10));
        rep_stosb(map.add(0x830), 0x5a, 100);
        sfence();
    }
    call(Operation::Checkpoint(2));
    persim_probe_outer(map);
    call(Operation::Checkpoint(3));
    Ok(())
}

/// FILE with FILE_SIZE bytes written and synced, so its blocks are allocated, written and
/// their metadata durable before it is mapped.
fn create_written(path: &str) -> Result<File, String> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| format!("creating {path}: {e}"))?;
    file.write_all(&[0xee; FILE_SIZE])
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("writing {path}: {e}"))?;
    Ok(file)
}

/// The PM offset (from the start of the NVDIMM region) of the file's first byte.
fn pm_offset(file: &File) -> Result<u64, String> {
    let device_offset = fiemap_physical(file)?;
    // The pmem disk's parent is its pfn (fsdax) device, whose resource is the physical
    // address of the disk's first byte.
    let disk = read_sys_u64("/sys/block/pmem0/device/resource")?;
    let region = read_sys_u64("/sys/bus/nd/devices/region0/resource")?;
    Ok(disk - region + device_offset)
}

fn read_sys_u64(path: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
    let text = text.trim();
    let hex = text.strip_prefix("0x").unwrap_or(text);
    u64::from_str_radix(hex, 16).map_err(|_| format!("{path}: `{text}` is not a hex address"))
}

/// struct fiemap with room for one extent (linux/fiemap.h).
#[repr(C)]
#[derive(Default)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extent: FiemapExtent,
}

#[repr(C)]
#[derive(Default)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

/// _IOWR('f', 11, struct fiemap)
const FS_IOC_FIEMAP: libc::c_ulong = 0xc020_660b;
const FIEMAP_FLAG_SYNC: u32 = 1;

/// The device offset of the file's first byte; the whole file must be one extent.
fn fiemap_physical(file: &File) -> Result<u64, String> {
    let mut map = Fiemap {
        length: FILE_SIZE as u64,
        flags: FIEMAP_FLAG_SYNC,
        extent_count: 1,
        ..Fiemap::default()
    };
    // SAFETY: FS_IOC_FIEMAP fills at most `extent_count` extents after the header.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map) };
    if rc != 0 {
        return Err(format!("FIEMAP: {}", std::io::Error::last_os_error()));
    }
    if map.mapped_extents != 1 || map.extent.logical != 0 || map.extent.length < FILE_SIZE as u64 {
        return Err("the file is not one allocated extent".into());
    }
    Ok(map.extent.physical)
}

/// The call chain of the stack-trace test: not inlined, and each function does PM work
/// after its call so that no call becomes a tail call (which would drop a frame).
#[inline(never)]
#[no_mangle]
extern "C" fn persim_probe_outer(map: *mut u8) {
    persim_probe_middle(map);
    sfence();
}

#[inline(never)]
#[no_mangle]
extern "C" fn persim_probe_middle(map: *mut u8) {
    persim_probe_inner(map);
    // SAFETY: the mapping is FILE_SIZE bytes long.
    unsafe { clwb(map.add(0x1000)) };
}

#[inline(never)]
#[no_mangle]
extern "C" fn persim_probe_inner(map: *mut u8) {
    // SAFETY: the mapping is FILE_SIZE bytes long.
    unsafe { map.add(0x1000).cast::<u64>().write_volatile(INNER_VALUE) };
}

/// # Safety
/// `dst` must be valid for an 8-byte write.
unsafe fn movnti(dst: *mut u64, value: u64) {
    std::arch::asm!("movnti [{dst}], {value}", dst = in(reg) dst, value = in(reg) value, options(nostack));
}

/// # Safety
/// `line` must point into mapped memory.
unsafe fn clwb(line: *mut u8) {
    std::arch::asm!("clwb [{line}]", line = in(reg) line, options(nostack));
}

/// # Safety
/// `line` must point into mapped memory.
unsafe fn clflushopt(line: *mut u8) {
    std::arch::asm!("clflushopt [{line}]", line = in(reg) line, options(nostack));
}

/// # Safety
/// `dst` must be valid for `count` bytes of writes.
unsafe fn rep_stosb(dst: *mut u8, byte: u8, count: usize) {
    std::arch::asm!(
        "rep stosb",
        inout("rdi") dst => _,
        inout("rcx") count => _,
        in("al") byte,
        options(nostack)
    );
}

fn sfence() {
    // SAFETY: a store fence has no operands.
    unsafe { std::arch::asm!("sfence", options(nostack)) };
}

#[cfg(test)]
mod tests {
    use super::parse;
    use persim_guest::command_line::words;

    fn parse_line(line: &str) -> Result<Option<String>, String> {
        parse(words(line))
    }

    #[test]
    fn takes_one_file() {
        assert_eq!(parse_line("/mnt/probe"), Ok(Some("/mnt/probe".into())));
        assert_eq!(parse_line("--help"), Ok(None));
        assert!(parse_line("").unwrap_err().contains("FILE"));
        assert!(parse_line("/a /b").unwrap_err().contains("/b"));
        assert!(parse_line("--fast /a").unwrap_err().contains("--fast"));
    }
}
