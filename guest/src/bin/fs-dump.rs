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

use options::{Command, USAGE};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let options = match options::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Dump(options)) => options,
        Err(message) => {
            eprintln!("fs-dump: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
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
