//! `hypercall start | checkpoint N | success | fail`: tells the Persim tracer (the QEMU TCG
//! plugin) where a test is.
//!
//! The call is a `cpuid` with a magic leaf in eax, the operation in edx and its argument in
//! rcx. `cpuid` runs in user and kernel mode alike, never faults, and the plugin sees it
//! at translation time from its opcode (0f a2) and reads the registers when it executes.
//! On a machine without the plugin it is a harmless cpuid of an unknown leaf.

use lexopt::Arg::{Long, Short, Value};
use lexopt::ValueExt;
use persim_guest::command_line::parse_or_exit;
use persim_guest::hypercall::{self, call, Operation};
use std::ffi::OsString;
use std::process::ExitCode;

const USAGE: &str = "\
usage: hypercall start | checkpoint N | success | fail

Marks the start of a test, the checkpoint N (a non-negative integer), or its end for the
Persim tracer; harmless without it.";

fn main() -> ExitCode {
    match parse_or_exit("hypercall", USAGE, parse) {
        Ok(op) => {
            call(match op {
                Operation::Start { .. } => hypercall::start(),
                op => op,
            });
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// The operation on the command line, or `None` for `--help`.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Operation>, String> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut words = Vec::new();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Value(word) => words.push(word.string().map_err(|e| e.to_string())?),
            other => return Err(other.unexpected().to_string()),
        }
    }
    Operation::parse(&words).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Option<Operation>, String> {
        parse(persim_guest::command_line::words(line))
    }

    #[test]
    fn operations_help_and_bad_lines() {
        assert_eq!(
            parse_line("checkpoint 3"),
            Ok(Some(Operation::Checkpoint(3)))
        );
        assert!(matches!(
            parse_line("start"),
            Ok(Some(Operation::Start { pid: 0, .. }))
        ));
        assert_eq!(parse_line("--help"), Ok(None));
        assert_eq!(parse_line("-h"), Ok(None));
        assert!(parse_line("--fast start").unwrap_err().contains("--fast"));
        assert!(parse_line("checkpoint")
            .unwrap_err()
            .contains("unknown arguments"));
        assert!(parse_line("").unwrap_err().contains("unknown arguments"));
    }
}
