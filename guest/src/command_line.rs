//! The one command-line convention of the guest tools (parsed with `lexopt`): `-h`/`--help`
//! prints the usage and exits 0, a bad command line prints a message and the usage to
//! stderr and exits 2.

use std::ffi::OsString;
use std::process::ExitCode;

/// Parses the arguments after the program name with `parse`, which gives `None` for
/// `--help`. Returns what it parsed, or the exit code the tool must end with at once
/// after the usage or the error has been printed.
pub fn parse_or_exit<T>(
    tool: &str,
    usage: &str,
    parse: impl FnOnce(std::iter::Skip<std::env::ArgsOs>) -> Result<Option<T>, String>,
) -> Result<T, ExitCode> {
    decide(tool, usage, parse(std::env::args_os().skip(1)))
}

fn decide<T>(tool: &str, usage: &str, parsed: Result<Option<T>, String>) -> Result<T, ExitCode> {
    match parsed {
        Ok(Some(parsed)) => Ok(parsed),
        Ok(None) => {
            println!("{usage}");
            Err(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("{tool}: {message}\n\n{usage}");
            Err(ExitCode::from(2))
        }
    }
}

/// The arguments of a test, as a tool's parser takes them.
pub fn words(line: &str) -> impl Iterator<Item = OsString> + '_ {
    line.split_whitespace().map(OsString::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_exits_0_and_errors_exit_2() {
        assert_eq!(decide("t", "usage", Ok(Some(5))), Ok(5));
        assert_eq!(decide::<u8>("t", "usage", Ok(None)), Err(ExitCode::SUCCESS));
        assert_eq!(
            decide::<u8>("t", "usage", Err("bad".into())),
            Err(ExitCode::from(2))
        );
    }
}
