//! `fs-ops OP ARGS...`: one file-system operation with the exact system call a generated
//! (ACE) test asks for — `pwrite` at an offset, `fallocate` with its mode, `setxattr`,
//! `rename` — which busybox applets cannot express. A failed call prints the call and its
//! error and exits 1, so the test fails with the guest's own reason.
//!
//! `fs-ops calls CALL...`: the calls of a test's `calls`, in one process, with `hypercall
//! checkpoint N` before call N and after the last: every system call is judged on its own.

use persim_abi::operations::{OPERATION_FAILED, OPERATION_STARTS};
use persim_guest::command_line::parse_or_exit;
use persim_guest::fs_ops::{run, Op, Process};
use persim_guest::hypercall::{call, Operation};
use std::process::ExitCode;

const USAGE: &str = "\
usage: fs-ops OP ARGS...

  creat PATH                       open(O_CREAT|O_WRONLY, 0644) and close
  mkdir PATH                       mkdir(0755)
  write PATH OFFSET LEN [TAG]      pwrite LEN bytes at OFFSET: letters that depend on the
                                   file offset and on TAG (0 to 25, default 0), so
                                   each write of a test can have its own bytes
  falloc PATH MODE OFFSET LEN      fallocate, MODE: allocate, keep-size, punch-hole,
                                   zero-range, zero-range-keep-size
  truncate PATH LEN                truncate
  link OLD NEW | symlink TARGET PATH | rename OLD NEW
  unlink PATH | rmdir PATH
  setxattr PATH NAME VALUE | removexattr PATH NAME
  fsync PATH | fdatasync PATH | sync
  open PATH | close PATH           open(O_CREAT|O_RDWR, 0644), close (with `calls`)

  calls CALL...                    each CALL (\"OP ARGS...\", one argument) in this one
                                   process, a checkpoint before each and after the last;
                                   write, falloc, truncate, fsync and fdatasync of an open
                                   PATH use its descriptor

Numbers are decimal or 0x-hex. Exit 0 on success, 1 when the call fails (its error is
printed), 2 for a bad command line.";

/// What the command line asks for.
enum Request {
    One(Op),
    Calls(Vec<Op>),
}

fn main() -> ExitCode {
    match parse_or_exit("fs-ops", USAGE, |args| {
        let words: Vec<String> = args
            .map(|a| a.into_string().map_err(|a| format!("{a:?} is not UTF-8")))
            .collect::<Result<_, _>>()?;
        if words.iter().any(|w| w == "-h" || w == "--help") {
            return Ok(None);
        }
        match words.split_first() {
            Some((first, calls)) if first == "calls" => {
                if calls.is_empty() {
                    return Err("`calls` needs at least one CALL".into());
                }
                let ops = calls.iter().map(|c| {
                    let words: Vec<String> = c.split_whitespace().map(str::to_owned).collect();
                    Op::parse(&words)
                });
                ops.collect::<Result<_, _>>()
                    .map(|ops| Some(Request::Calls(ops)))
            }
            _ => Op::parse(&words).map(|op| Some(Request::One(op))),
        }
    }) {
        Ok(Request::One(op)) => match run(&op) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        Ok(Request::Calls(ops)) => run_calls(&ops),
        Err(code) => code,
    }
}

/// Call N between checkpoints N and N+1, as a test's operations (the tester's markers
/// name the call that starts and the one that failed).
fn run_calls(ops: &[Op]) -> ExitCode {
    let mut process = Process::default();
    for (n, op) in (1..).zip(ops) {
        call(Operation::Checkpoint(n));
        println!("{OPERATION_STARTS}{n}");
        if let Err(e) = process.run(op) {
            println!("{OPERATION_FAILED} {n} failed (exit code 1)");
            return fail(&e);
        }
    }
    call(Operation::Checkpoint(ops.len() as u64 + 1));
    ExitCode::SUCCESS
}

fn fail(e: &str) -> ExitCode {
    eprintln!("fs-ops: {e}");
    ExitCode::FAILURE
}
