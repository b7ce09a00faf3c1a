//! `fw-cfg [--wait] NAME`: prints the fw_cfg file NAME that QEMU's command line gave the
//! guest (see persim_guest::fw_cfg). init.sh takes a guest's first commands from it.

use lexopt::Arg::{Long, Short, Value};
use lexopt::ValueExt;
use persim_guest::command_line::parse_or_exit;
use persim_guest::fw_cfg::{read_file, MachinePorts};
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "\
usage: fw-cfg [--wait] NAME

Prints the fw_cfg file NAME (given to QEMU as `-fw_cfg name=NAME,…`). Exits 1 if the
machine has no such file; with --wait, reads the file directory again and again until the
file is there (a guest saved as a snapshot waits so for the QEMU it is restored in).";

struct Args {
    wait: bool,
    name: String,
}

fn main() -> ExitCode {
    let args = match parse_or_exit("fw-cfg", USAGE, parse) {
        Ok(args) => args,
        Err(code) => return code,
    };
    let mut ports = match MachinePorts::open() {
        Ok(ports) => ports,
        Err(e) => {
            eprintln!("fw-cfg: no access to the fw_cfg ports: {e}");
            return ExitCode::FAILURE;
        }
    };
    let contents = loop {
        match read_file(&mut ports, &args.name) {
            Some(contents) => break contents,
            None if args.wait => std::hint::spin_loop(),
            None => {
                eprintln!("fw-cfg: the machine has no fw_cfg file {}", args.name);
                return ExitCode::FAILURE;
            }
        }
    };
    match std::io::stdout().write_all(&contents) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fw-cfg: writing the file: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The arguments, or `None` for `--help`.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Args>, String> {
    let mut parser = lexopt::Parser::from_args(args);
    let (mut wait, mut name) = (false, None);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Long("wait") => wait = true,
            Value(value) if name.is_none() => {
                name = Some(value.string().map_err(|e| e.to_string())?)
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    let name = name.ok_or("a file name is required")?;
    Ok(Some(Args { wait, name }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Option<(bool, String)>, String> {
        parse(persim_guest::command_line::words(line)).map(|a| a.map(|a| (a.wait, a.name)))
    }

    #[test]
    fn a_name_with_or_without_wait_help_and_bad_lines() {
        assert_eq!(parse_line("opt/x"), Ok(Some((false, "opt/x".into()))));
        assert_eq!(parse_line("--wait opt/x"), Ok(Some((true, "opt/x".into()))));
        assert_eq!(parse_line("--help"), Ok(None));
        assert!(parse_line("").unwrap_err().contains("required"));
        assert!(parse_line("opt/x opt/y").is_err());
        assert!(parse_line("--fast opt/x").unwrap_err().contains("--fast"));
    }
}
