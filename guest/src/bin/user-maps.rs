//! `user-maps record FILE -- COMMAND…` and `user-maps symbols FILE`: the traced run's
//! user code and its functions (see persim_guest::user_maps).

use lexopt::Arg::{Long, Short, Value};
use lexopt::ValueExt;
use persim_guest::command_line::parse_or_exit;
use persim_guest::user_maps::{c_string, run_recording_mappings, spaces_from_text, spaces_to_text};
use std::ffi::{CString, OsString};
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "\
usage: user-maps record FILE -- COMMAND [ARG...]
       user-maps symbols FILE

record   runs COMMAND under ptrace, following its children, writes the executable file
         mappings of every process and thread it ran (at their exit; one block for each
         distinct address space) to FILE, and exits with COMMAND's exit status (128 + the
         signal that ended it).
symbols  prints the functions of FILE's mappings at their run-time addresses, read from
         the mapped files' ELF symbol tables, as /proc/kallsyms does for the kernel, each
         with `@N` for its address space.";

enum Args {
    Record { file: String, argv: Vec<CString> },
    Symbols { file: String },
}

fn main() -> ExitCode {
    let args = match parse_or_exit("user-maps", USAGE, parse) {
        Ok(args) => args,
        Err(code) => return code,
    };
    match args {
        Args::Record { file, argv } => record(&file, &argv),
        Args::Symbols { file } => symbols(&file),
    }
}

fn record(file: &str, argv: &[CString]) -> ExitCode {
    let (status, spaces) = match run_recording_mappings(argv) {
        Ok(done) => done,
        Err(e) => {
            eprintln!("user-maps: running {:?}: {e}", argv[0]);
            return ExitCode::from(127);
        }
    };
    if let Err(e) = std::fs::write(file, spaces_to_text(&spaces)) {
        // The command's status is the run's verdict; missing symbols only cost names.
        eprintln!("user-maps: writing {file}: {e}");
    }
    ExitCode::from(u8::try_from(status).unwrap_or(u8::MAX))
}

fn symbols(file: &str) -> ExitCode {
    let maps = match std::fs::read_to_string(file) {
        Ok(maps) => maps,
        Err(e) => {
            eprintln!("user-maps: reading {file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    let spaces = spaces_from_text(&maps);
    for (space, mappings) in (1..).zip(&spaces) {
        for mapping in mappings {
            // A file gone since the run, or one that is not ELF, only loses its names.
            let lines = std::fs::read(&mapping.path)
                .map_err(|e| format!("{}: {e}", mapping.path))
                .and_then(|data| mapping.kallsyms_lines(&data, space));
            match lines {
                Ok(lines) => {
                    if out.write_all(lines.as_bytes()).is_err() {
                        return ExitCode::FAILURE;
                    }
                }
                Err(e) => eprintln!("user-maps: no symbols: {e}"),
            }
        }
    }
    ExitCode::SUCCESS
}

/// The arguments, or `None` for `--help`.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Args>, String> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut words = Vec::new();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Value(value) => words.push(value),
            other => return Err(other.unexpected().to_string()),
        }
        if words.len() == 2 && words[0] == "record" {
            // Everything after FILE (and `--`) is the command, options included.
            let mut raw = parser.raw_args().map_err(|e| e.to_string())?;
            if raw.peek().is_some_and(|a| a == "--") {
                raw.next();
            }
            let argv = raw
                .map(|a| c_string(&a).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            if argv.is_empty() {
                return Err("record needs a command after FILE --".into());
            }
            let file = words[1].clone().string().map_err(|e| e.to_string())?;
            return Ok(Some(Args::Record { file, argv }));
        }
    }
    match words.as_slice() {
        [verb, file] if verb == "symbols" => Ok(Some(Args::Symbols {
            file: file.clone().string().map_err(|e| e.to_string())?,
        })),
        [verb, ..] if verb == "record" => Err("record needs FILE -- COMMAND".into()),
        [] => Err("record or symbols is required".into()),
        [verb, ..] => Err(format!("unknown or incomplete command {verb:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Option<String>, String> {
        parse(persim_guest::command_line::words(line)).map(|a| {
            a.map(|a| match a {
                Args::Record { file, argv } => format!(
                    "record {file}: {}",
                    argv.iter()
                        .map(|a| a.to_str().unwrap())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                Args::Symbols { file } => format!("symbols {file}"),
            })
        })
    }

    #[test]
    fn record_takes_the_rest_as_the_command_and_symbols_a_file() {
        assert_eq!(
            parse_line("record /tmp/m -- sh -c -x").unwrap(),
            Some("record /tmp/m: sh -c -x".into())
        );
        assert_eq!(
            parse_line("record /tmp/m true").unwrap(),
            Some("record /tmp/m: true".into())
        );
        assert_eq!(
            parse_line("symbols /tmp/m").unwrap(),
            Some("symbols /tmp/m".into())
        );
        assert_eq!(parse_line("--help").unwrap(), None);
        assert!(parse_line("record /tmp/m --")
            .unwrap_err()
            .contains("command"));
        assert!(parse_line("").unwrap_err().contains("required"));
        assert!(parse_line("symbols").is_err());
        assert!(parse_line("list /tmp/m").unwrap_err().contains("list"));
    }
}
