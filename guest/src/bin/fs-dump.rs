//! `fs-dump [OPTIONS] ROOT`: prints the user-visible state of a file system tree as
//! deterministic JSON, the state Persim compares across crash images. `fs-dump --help`
//! describes the options; suites/README.md describes the output.

#[path = "../fs_dump/json.rs"]
mod json;
#[path = "../fs_dump/options.rs"]
mod options;
#[path = "../fs_dump/record.rs"]
mod record;
#[path = "../fs_dump/text.rs"]
mod text;
#[path = "../fs_dump/walk.rs"]
mod walk;

use options::USAGE;
use persim_guest::command_line::parse_or_exit;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let options = match parse_or_exit("fs-dump", USAGE, options::parse) {
        Ok(options) => options,
        Err(code) => return code,
    };
    let dump = match walk::dump(&options) {
        Ok(dump) => dump,
        Err(message) => {
            eprintln!("fs-dump: {message}");
            return ExitCode::from(1);
        }
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(json::render(&dump).as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("fs-dump: cannot write the dump to stdout: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
