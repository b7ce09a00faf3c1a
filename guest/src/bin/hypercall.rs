//! `hypercall start | checkpoint N | success | fail`: tells the Persim tracer (the QEMU TCG
//! plugin) where a test is.
//!
//! The call is a `cpuid` with a magic leaf in eax, the operation in edx and its argument in
//! rcx. `cpuid` runs in user and kernel mode alike, never faults, and the plugin sees it
//! at translation time from its opcode (0f a2) and reads the registers when it executes.
//! On a machine without the plugin it is a harmless cpuid of an unknown leaf.

use persim_guest::hypercall::{call, Operation};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match Operation::parse(&args) {
        Ok(op) => {
            call(op);
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!(
                "hypercall: {message}\nusage: hypercall start | checkpoint N | success | fail"
            );
            ExitCode::from(2)
        }
    }
}
