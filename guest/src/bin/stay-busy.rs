//! `stay-busy`: keeps the guest's CPU from halting, at the lowest priority there is
//! (SCHED_IDLE: it runs only when nothing else can), until it is killed.
//!
//! Why: under `-icount` guest time counts instructions, except while the CPU halts. A
//! halted guest sleeps in host time, and QEMU wakes it when the host's timer fires, a
//! little after the guest timer's deadline, by however much the host was late; the guest's
//! clock moves on by that much. While this runs, the guest never halts, so its clock, and
//! with it every timestamp a test writes, is a count of instructions (docs/design/tracer.md,
//! "Reproducibility"). init.sh runs it while a guest runs its first commands.

use persim_guest::command_line::parse_or_exit;
use std::ffi::OsString;
use std::process::ExitCode;

const USAGE: &str = "\
usage: stay-busy

Spins at SCHED_IDLE priority until killed, so that the CPU never halts.";

fn main() -> ExitCode {
    if let Err(code) = parse_or_exit("stay-busy", USAGE, parse) {
        return code;
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes this process's own scheduling policy; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        eprintln!(
            "stay-busy: cannot run at SCHED_IDLE: {}",
            std::io::Error::last_os_error()
        );
        return ExitCode::FAILURE;
    }
    // Not `spin_loop()`: QEMU's TCG makes each `pause` leave the translated code, which
    // slows the guest's other work down many times over.
    loop {
        std::hint::black_box(());
    }
}

/// No arguments but `--help` (`None`).
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<()>, String> {
    let mut parser = lexopt::Parser::from_args(args);
    match parser.next().map_err(|e| e.to_string())? {
        None => Ok(Some(())),
        Some(lexopt::Arg::Short('h') | lexopt::Arg::Long("help")) => Ok(None),
        Some(other) => Err(other.unexpected().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_arguments_or_help() {
        let parse_line = |line| parse(persim_guest::command_line::words(line));
        assert_eq!(parse_line(""), Ok(Some(())));
        assert_eq!(parse_line("--help"), Ok(None));
        assert!(parse_line("5").is_err());
    }
}
