//! `held-writes [--writers N] [--size BYTES] [--in FUNCTION] [--probe FILE] DIR`: makes N
//! `write()`s meet inside a kernel function, for tests that must see writers at once
//! without relying on timing (pm-throttle's `writers` count, crates/vm/tests/guest.rs).
//!
//! Each writer thread writes SIZE bytes to `DIR/held.I` from an anonymous buffer whose
//! pages are missing and registered with a userfaultfd, so the kernel's copy from the buffer
//! stops at its first byte. The faults are left unresolved until every writer thread's
//! kernel stack (`/proc/self/task/TID/stack`) passes through FUNCTION, whether stopped in
//! the copy or waiting before it. Then FILE is read and printed (`held: FILE = VALUE`),
//! the pages are supplied, and each file is read back and compared with what was written.

use lexopt::Arg::{Long, Short, Value};
use lexopt::ValueExt;
use persim_guest::command_line::parse_or_exit;
use std::ffi::{c_void, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};
use userfaultfd::{Uffd, UffdBuilder};

const USAGE: &str = "\
usage: held-writes [--writers N] [--size BYTES] [--in FUNCTION] [--probe FILE]
                   [--timeout SECONDS] DIR

Starts N threads (default 2) that each write SIZE bytes (default 131072, a multiple of
4096) to DIR/held.I from a buffer whose pages are missing (userfaultfd). The kernel's copy
of each write stops at the buffer's first page until every writer's kernel stack passes
through FUNCTION (default pmt_copy, pm-throttle's copy); then FILE is read and printed as
`held: FILE = VALUE`, the pages are supplied and every file is checked. Exits 1 when the
writers do not all reach FUNCTION within the timeout (default 300 s; their stacks are
printed), 2 for bad arguments. Needs root (kernel-mode faults on a userfaultfd).";

const PAGE: usize = 4096;

#[derive(Debug)]
struct Options {
    writers: usize,
    size: usize,
    function: String,
    probe: Option<PathBuf>,
    timeout: Duration,
    dir: PathBuf,
}

fn main() -> ExitCode {
    let options = match parse_or_exit("held-writes", USAGE, parse) {
        Ok(options) => options,
        Err(code) => return code,
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("held-writes: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The options, or `None` for `--help`.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Options>, String> {
    let Some((options, dir)) = parse_words(args).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    if options.writers == 0 || options.size == 0 || options.size % PAGE != 0 {
        return Err("give --writers of at least 1 and a --size that is a multiple of 4096".into());
    }
    let dir = dir.ok_or("give the DIR to write in")?;
    Ok(Some(Options { dir, ..options }))
}

fn parse_words(
    args: impl IntoIterator<Item = OsString>,
) -> Result<Option<(Options, Option<PathBuf>)>, lexopt::Error> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut options = Options {
        writers: 2,
        size: 32 * PAGE,
        function: "pmt_copy".to_owned(),
        probe: None,
        timeout: Duration::from_secs(300),
        dir: PathBuf::new(),
    };
    let mut dir = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Long("writers") => options.writers = parser.value()?.parse()?,
            Long("size") => options.size = parser.value()?.parse()?,
            Long("in") => options.function = parser.value()?.string()?,
            Long("probe") => options.probe = Some(parser.value()?.into()),
            Long("timeout") => options.timeout = Duration::from_secs(parser.value()?.parse()?),
            Value(path) if dir.is_none() => dir = Some(PathBuf::from(path)),
            other => return Err(other.unexpected()),
        }
    }
    Ok(Some((options, dir)))
}

/// An anonymous private mapping whose pages stay missing until the userfaultfd supplies them.
struct MissingBuffer {
    addr: *mut c_void,
    len: usize,
}

// SAFETY: the mapping is only read by the kernel on the writer's behalf and filled by
// UFFDIO_COPY; no Rust reference to its bytes exists.
unsafe impl Send for MissingBuffer {}

impl MissingBuffer {
    fn new(uffd: &Uffd, len: usize) -> Result<MissingBuffer, String> {
        // SAFETY: a fresh anonymous mapping, unmapped in drop.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        let buffer = MissingBuffer { addr, len };
        uffd.register(addr, len)
            .map_err(|e| format!("registering the buffer with the userfaultfd: {e}"))?;
        Ok(buffer)
    }
}

impl Drop for MissingBuffer {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), no longer used by any thread.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

fn pattern(writer: usize, size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (i / PAGE + writer * 31) as u8 ^ 0x5a)
        .collect()
}

fn run(options: &Options) -> Result<(), String> {
    let uffd = UffdBuilder::new()
        .close_on_exec(true)
        .non_blocking(true)
        // The faults to hold are the kernel's, in its copy from the buffer.
        .user_mode_only(false)
        .create()
        .map_err(|e| format!("creating a userfaultfd (root needed): {e}"))?;
    let buffers = (0..options.writers)
        .map(|_| MissingBuffer::new(&uffd, options.size))
        .collect::<Result<Vec<_>, _>>()?;
    let (tids, writer_tids) = mpsc::channel();
    let writers = buffers
        .iter()
        .enumerate()
        .map(|(i, buffer)| {
            let path = options.dir.join(format!("held.{i}"));
            let (addr, len) = (buffer.addr as usize, buffer.len);
            let tids = tids.clone();
            thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tids.send(unsafe { libc::gettid() }).ok();
                // SAFETY: the mapping outlives the thread (joined before the buffers drop);
                // its missing pages are filled by the main thread, never written by Rust.
                let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
                File::create(&path)
                    .and_then(|mut file| file.write_all(bytes))
                    .map_err(|e| format!("{}: {e}", path.display()))
            })
        })
        .collect::<Vec<_>>();
    let tids: Vec<i32> = writer_tids.iter().take(options.writers).collect();
    let held = wait_until_all_in(&uffd, &tids, &options.function, options.timeout);
    if held.is_ok() {
        if let Some(probe) = &options.probe {
            let value =
                std::fs::read_to_string(probe).map_err(|e| format!("{}: {e}", probe.display()))?;
            println!("held: {} = {}", probe.display(), value.trim());
        }
    }
    for (i, buffer) in buffers.iter().enumerate() {
        let source = pattern(i, buffer.len);
        // SAFETY: the whole buffer is registered and none of its pages is present yet.
        unsafe { uffd.copy(source.as_ptr().cast(), buffer.addr, buffer.len, true) }
            .map_err(|e| format!("supplying writer {i}'s pages: {e}"))?;
    }
    for writer in writers {
        writer.join().map_err(|_| "a writer panicked")??;
    }
    held?;
    for i in 0..options.writers {
        check_file(
            &options.dir.join(format!("held.{i}")),
            &pattern(i, options.size),
        )?;
    }
    println!(
        "written and read back: {} writers of {} bytes",
        options.writers, options.size
    );
    Ok(())
}

/// Waits until every writer's kernel stack passes through `function`, draining the
/// userfaultfd's events (the faults stay unresolved). Names the writers that did not, with
/// their stacks, after `timeout`.
fn wait_until_all_in(
    uffd: &Uffd,
    tids: &[i32],
    function: &str,
    timeout: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        while let Ok(Some(_)) = uffd.read_event() {}
        let stacks = tids
            .iter()
            .map(|&tid| kernel_stack(tid))
            .collect::<Vec<_>>();
        let outside = stacks
            .iter()
            .zip(tids)
            .filter(|(stack, _)| !passes_through(stack, function))
            .collect::<Vec<_>>();
        if outside.is_empty() {
            return Ok(());
        }
        if start.elapsed() > timeout {
            let shown = outside
                .iter()
                .map(|(stack, tid)| format!("writer thread {tid}:\n{stack}"))
                .collect::<Vec<_>>()
                .join("\n");
            return Err(format!(
                "{} of {} writers never reached {function} in {} s:\n{shown}",
                outside.len(),
                tids.len(),
                timeout.as_secs()
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn kernel_stack(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stack"))
        .unwrap_or_else(|e| format!("(no stack: {e})"))
}

/// Whether a `/proc/.../stack` listing has a frame of `function` itself (`function+0x..`).
fn passes_through(stack: &str, function: &str) -> bool {
    stack.lines().any(|line| {
        line.split_whitespace().nth(1).is_some_and(|frame| {
            frame
                .strip_prefix(function)
                .is_some_and(|rest| rest.starts_with('+'))
        })
    })
}

fn check_file(path: &Path, expected: &[u8]) -> Result<(), String> {
    let mut read = Vec::new();
    File::open(path)
        .and_then(|mut file| file.read_to_end(&mut read))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if read != expected {
        return Err(format!("{} does not hold what was written", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_counts_only_for_the_function_itself() {
        let stack =
            "[<0>] handle_userfault+0x1f0/0x5a0\n[<0>] pmt_copy_now+0x10/0x40 [pm_throttle]\n";
        assert!(!passes_through(stack, "pmt_copy"));
        let stack = format!("{stack}[<0>] pmt_copy+0x8c/0x1e0 [pm_throttle]\n");
        assert!(passes_through(&stack, "pmt_copy"));
        assert!(passes_through(&stack, "handle_userfault"));
    }

    #[test]
    fn bad_arguments_are_refused_with_what_to_give() {
        let words = |s: &str| s.split_whitespace().map(OsString::from).collect::<Vec<_>>();
        assert!(parse(words("--size 100 /mnt"))
            .unwrap_err()
            .contains("multiple of 4096"));
        assert!(parse(words("--writers 0 /mnt"))
            .unwrap_err()
            .contains("--writers"));
        assert!(parse(words("--writers 3")).unwrap_err().contains("DIR"));
        let options = parse(words("--writers 3 --probe /sys/x /mnt"))
            .unwrap()
            .unwrap();
        assert_eq!((options.writers, options.size), (3, 32 * PAGE));
        assert_eq!(options.function, "pmt_copy");
    }
}
