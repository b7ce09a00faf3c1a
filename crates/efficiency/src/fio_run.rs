//! Running fio in a directory of its own on the target, which is removed afterwards
//! whatever happens (an error, Ctrl-C): a series never leaves fio files behind.

use crate::fio::{self, FioJob, FioResult, Place};
use crate::interrupt;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The directory fio's files go in, removed when dropped.
pub struct WorkDir(PathBuf);

impl WorkDir {
    pub fn create(target: &Path) -> Result<WorkDir, String> {
        let dir = target.join(format!("persim-efficiency.{}", std::process::id()));
        // A directory left by a killed series of this process id is ours to reuse.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(WorkDir(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What [`run`] returns: fio's parsed result and its JSON output as printed.
pub struct FioOutput {
    pub result: FioResult,
    pub json: String,
}

/// How long fio may take to end after SIGINT before its processes are killed: fio 3.33
/// interrupted while laying out files (`--create_only=1`) never ends.
const GRACE: Duration = Duration::from_secs(5);

/// Runs `fio` with `args` to the end, or stops it when the series is interrupted: fio and
/// its job processes, in a process group of their own, get SIGINT, as from a terminal,
/// and SIGKILL after [`GRACE`].
pub fn run(program: &str, args: &[String]) -> Result<FioOutput, String> {
    let mut child = Command::new(program)
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    // fio's process group: its own id (`process_group(0)`).
    let group = -(child.id() as libc::pid_t);
    let mut signalled: Option<Instant> = None;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if interrupt::interrupted() {
            match signalled {
                // SAFETY: the group of our own child, which has not been waited for yet.
                None => unsafe {
                    libc::kill(group, libc::SIGINT);
                    signalled = Some(Instant::now());
                },
                Some(at) if at.elapsed() > GRACE => unsafe {
                    libc::kill(group, libc::SIGKILL);
                },
                Some(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (json, stderr) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    if interrupt::interrupted() {
        return Err("interrupted".into());
    }
    if !status.success() {
        return Err(format!(
            "fio {} failed ({status}): {}",
            args.join(" "),
            stderr.trim()
        ));
    }
    let result = fio::parse_output(&json)?;
    Ok(FioOutput { result, json })
}

/// Lays out the job's files first (`--create_only=1`), so that the measured run spends
/// its time writing, not creating files.
pub fn lay_out(program: &str, job: &FioJob, jobs: u32, dir: &Path) -> Result<(), String> {
    let mut args = job.args(jobs, Place::Directory(dir));
    args.push("--create_only=1".into());
    run(program, &args).map(|_| ())
}
