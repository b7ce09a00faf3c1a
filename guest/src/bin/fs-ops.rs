//! `fs-ops OP ARGS...`: one file-system operation with the exact system call a generated
//! (ACE) test asks for — `pwrite` at an offset, `fallocate` with its mode, `setxattr`,
//! `rename` — which busybox applets cannot express. A failed call prints the call and its
//! error and exits 1, so the test fails with the guest's own reason.

use persim_guest::command_line::parse_or_exit;
use persim_guest::fs_ops::{run, Op};
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

Numbers are decimal or 0x-hex. Exit 0 on success, 1 when the call fails (its error is
printed), 2 for a bad command line.";

fn main() -> ExitCode {
    match parse_or_exit("fs-ops", USAGE, |args| {
        let words: Vec<String> = args
            .map(|a| a.into_string().map_err(|a| format!("{a:?} is not UTF-8")))
            .collect::<Result<_, _>>()?;
        if words.iter().any(|w| w == "-h" || w == "--help") {
            return Ok(None);
        }
        Op::parse(&words).map(Some)
    }) {
        Ok(op) => match run(&op) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fs-ops: {e}");
                ExitCode::FAILURE
            }
        },
        Err(code) => code,
    }
}
