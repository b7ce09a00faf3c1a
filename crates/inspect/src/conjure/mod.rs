//! PmemConjurer: the PM programming rules (Zhang's dissertation, table 4.1) checked
//! statically, by the Clang Static Analyzer plugin in `conjurer/`, on a program's C
//! sources: one translation unit at a time, each through `clang --analyze` with the
//! plugin, its findings read from the analyzer's SARIF output (docs/design/conjurer.md).

mod sarif;
mod units;
mod witness;

use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

pub use units::{units, Unit};
pub use witness::{RunCheck, RunClass, RunLines};

/// The checker's name, as the plugin registers it and SARIF's `ruleId` names it.
const CHECKER: &str = "pmem.Conjurer";

#[derive(Debug, thiserror::Error)]
pub enum ConjureError {
    #[error(
        "the PmemConjurer plugin {0} does not exist: build it with conjurer/build.sh \
         (scripts/setup.sh does), or give its path with --plugin"
    )]
    NoPlugin(PathBuf),
    #[error(
        "cannot run {clang}: {source} (install clang-16, or give another clang 16 with --clang)"
    )]
    NoClang {
        clang: PathBuf,
        source: std::io::Error,
    },
    #[error("clang could not analyse {file}: fix the error or the flags (after --, or in compile_commands.json):\n{stderr}")]
    Compile { file: PathBuf, stderr: String },
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a compilation database (a JSON array of {{directory, file, arguments|command}}): {message}")]
    Database { path: PathBuf, message: String },
    #[error("{0} is not in the compilation database: give a file it compiles, or no file for all")]
    NotInDatabase(PathBuf),
    #[error("{0} does not exist: name C source files")]
    NoFile(PathBuf),
    #[error("no source file to analyse: name C files, or give --compile-commands")]
    NoFiles,
    #[error("the analyzer's output for {file} is not SARIF as clang 16 writes it: {message}")]
    Sarif { file: PathBuf, message: String },
}

/// One finding: a rule broken at `file:line`, with the analyzer's path to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `1`, `1a`, `1b`, `2`, `3` or `4`.
    pub rule: String,
    pub file: PathBuf,
    pub line: u32,
    pub column: u32,
    pub message: String,
    /// The bug path: the branches taken and the calls entered on the way.
    pub path: Vec<Step>,
    /// What a traced run of the program says of it (`persim conjure --trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunCheck>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    pub file: PathBuf,
    pub line: u32,
    pub message: String,
}

/// A translation unit's findings and how long the analysis took.
#[derive(Debug, Serialize)]
pub struct FileReport {
    pub file: PathBuf,
    pub seconds: f64,
    pub findings: Vec<Finding>,
}

/// A clang 16 and the plugin built for it.
pub struct Analyzer {
    pub clang: PathBuf,
    pub plugin: PathBuf,
}

impl Analyzer {
    /// Analyses one unit: clang's exit status, then its SARIF, read back.
    pub fn analyze(&self, unit: &Unit) -> Result<FileReport, ConjureError> {
        if !self.plugin.is_file() {
            return Err(ConjureError::NoPlugin(self.plugin.clone()));
        }
        let out = tempfile::Builder::new()
            .prefix("persim-conjure-")
            .suffix(".sarif")
            .tempfile()
            .map_err(|source| ConjureError::Read {
                path: std::env::temp_dir(),
                source,
            })?;
        let xclang = |a: &str| ["-Xclang".to_string(), a.to_string()];
        let mut cmd = Command::new(&self.clang);
        cmd.current_dir(&unit.directory).arg("--analyze");
        for a in [
            "-load",
            &self.plugin.display().to_string(),
            &format!("-analyzer-checker={CHECKER}"),
            "-analyzer-output=sarif",
        ] {
            cmd.args(xclang(a));
        }
        cmd.args(&unit.flags)
            .arg("-o")
            .arg(out.path())
            .arg(&unit.file);
        let start = Instant::now();
        let result = cmd.output().map_err(|source| ConjureError::NoClang {
            clang: self.clang.clone(),
            source,
        })?;
        let seconds = start.elapsed().as_secs_f64();
        if !result.status.success() {
            return Err(ConjureError::Compile {
                file: unit.file.clone(),
                stderr: String::from_utf8_lossy(&result.stderr)
                    .trim_end()
                    .to_string(),
            });
        }
        let text = std::fs::read_to_string(out.path()).map_err(|source| ConjureError::Read {
            path: out.path().to_path_buf(),
            source,
        })?;
        let findings = sarif::findings(&text, CHECKER).map_err(|message| ConjureError::Sarif {
            file: unit.file.clone(),
            message,
        })?;
        Ok(FileReport {
            file: unit.file.clone(),
            seconds,
            findings,
        })
    }
}
