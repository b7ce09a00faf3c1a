//! Booted snapshots: a guest is booted once per kernel, initramfs and machine, its state
//! right after boot saved with QEMU's migration to a file in the cache directory, and
//! every later guest of the same kind restored from it in about a second instead of
//! booting for seconds under TCG. QEMU is driven over QMP (a Unix socket per guest).
//!
//! The NVDIMM's memory is shared with its host file and left out (`x-ignore-shared`): each
//! guest keeps its own PM file, and QEMU 10 under TCG asserts when it migrates a shared
//! block. So a restored guest's kernel still holds the fsdax namespace of the PM it booted
//! on; its users re-attach the NVDIMM before they rely on PM contents (the tracing VM
//! detaches, zeroes and attaches; extraction workers attach each image).

use crate::error::VmError;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A QMP connection to one QEMU.
pub(crate) struct Qmp {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Qmp {
    /// A socket path of its own for a new guest (in the temporary directory: socket paths
    /// are limited to 107 bytes).
    pub(crate) fn socket_path() -> PathBuf {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        std::env::temp_dir().join(format!("persim-qmp-{}-{n}.sock", std::process::id()))
    }

    /// Connects to QEMU's QMP socket (QEMU creates it while starting) and enters command
    /// mode.
    pub(crate) fn connect(socket: &Path, timeout: Duration) -> Result<Qmp, VmError> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(stream) => break stream,
                Err(e) if Instant::now() >= deadline => {
                    return Err(VmError::io(
                        format!("connecting to QMP {}", socket.display()),
                        e,
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| VmError::io("QMP socket", e))?;
        let reader = BufReader::new(
            stream
                .try_clone()
                .map_err(|e| VmError::io("QMP socket", e))?,
        );
        let mut qmp = Qmp {
            writer: stream,
            reader,
        };
        qmp.read()?; // the greeting
        qmp.execute("qmp_capabilities", json!({}))?;
        Ok(qmp)
    }

    /// Runs a command and returns its `return` value; an `error` answer is an error.
    pub(crate) fn execute(&mut self, command: &str, arguments: Value) -> Result<Value, VmError> {
        let request = json!({"execute": command, "arguments": arguments});
        writeln!(self.writer, "{request}").map_err(|e| VmError::io("writing to QMP", e))?;
        loop {
            let mut answer = self.read()?;
            if let Some(value) = answer.get_mut("return") {
                return Ok(value.take());
            }
            if let Some(error) = answer.get("error") {
                return Err(VmError::Protocol(format!(
                    "QMP `{command}` failed: {error}"
                )));
            }
            // an asynchronous event: not the answer
        }
    }

    fn read(&mut self) -> Result<Value, VmError> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(VmError::Protocol("QEMU closed its QMP socket".into())),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| VmError::Protocol(format!("QMP sent `{}`: {e}", line.trim()))),
            Err(e) => Err(VmError::io("reading from QMP", e)),
        }
    }

    /// Waits until `done(answer)` of `command` says so, asking every few milliseconds.
    fn poll(
        &mut self,
        command: &str,
        timeout: Duration,
        mut done: impl FnMut(&Value) -> Result<bool, VmError>,
    ) -> Result<(), VmError> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if done(&self.execute(command, json!({}))?)? {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(VmError::Protocol(format!(
            "QMP `{command}` did not finish in time"
        )))
    }

    /// Waits until the migration (outgoing or incoming) has completed.
    fn migration_done(&mut self, what: &str, timeout: Duration) -> Result<(), VmError> {
        self.poll("query-migrate", timeout, |answer| {
            match answer["status"].as_str() {
                Some("completed") => Ok(true),
                Some("failed" | "cancelled") => {
                    Err(VmError::Protocol(format!("{what} failed: {answer}")))
                }
                _ => Ok(false),
            }
        })
    }

    fn ignore_shared_memory(&mut self) -> Result<(), VmError> {
        let capability =
            json!({"capabilities": [{"capability": "x-ignore-shared", "state": true}]});
        self.execute("migrate-set-capabilities", capability)
            .map(drop)
    }

    /// Saves the running guest to `file` (written beside it and renamed when complete),
    /// and lets it run on.
    pub(crate) fn save(&mut self, file: &Path, timeout: Duration) -> Result<(), VmError> {
        let partial = partial_path(file);
        let saved = (|| {
            self.ignore_shared_memory()?;
            self.execute("stop", json!({}))?;
            let uri = format!("file:{}", partial.display());
            self.execute("migrate", json!({"uri": uri}))?;
            self.migration_done("saving the booted guest", timeout)?;
            std::fs::rename(&partial, file)
                .map_err(|e| VmError::io(format!("renaming {}", partial.display()), e))
        })();
        if saved.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        self.execute("cont", json!({}))?;
        saved
    }

    /// Loads `file` into a QEMU started with `-incoming defer`, and starts the guest.
    pub(crate) fn restore(&mut self, file: &Path, timeout: Duration) -> Result<(), VmError> {
        self.ignore_shared_memory()?;
        let uri = format!("file:{}", file.display());
        self.execute("migrate-incoming", json!({"uri": uri}))?;
        self.migration_done("restoring the booted guest", timeout)?;
        self.execute("cont", json!({})).map(drop)
    }
}

/// Where a snapshot is written until it is complete: concurrent savers of one snapshot
/// (two `persim` processes) each write their own and the last rename wins.
fn partial_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(format!(
        ".{}-{:?}.partial",
        std::process::id(),
        std::thread::current().id()
    ));
    PathBuf::from(name)
}

/// The snapshot file of guests started with these QEMU arguments (those of one kind: what
/// differs between such guests, their PM file and plugin, left out by the caller).
pub(crate) fn snapshot_file(dir: &Path, qemu_version: &str, args: &[String]) -> PathBuf {
    let mut key = blake3::Hasher::new();
    key.update(qemu_version.as_bytes());
    for arg in args {
        key.update(arg.as_bytes()).update(b"\0");
    }
    dir.join(format!("booted-{}.qemu", &key.finalize().to_hex()[..16]))
}
