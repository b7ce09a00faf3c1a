//! Everything that can go wrong while preparing or running a VM, with messages that say
//! what to do about it.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum VmError {
    /// A VM configuration file could not be read or is invalid.
    Config { path: PathBuf, message: String },
    /// A component installed by scripts/setup.sh is missing or too old.
    Missing { what: String, hint: String },
    /// An I/O error while preparing the VM (initramfs, PM file, cache).
    Io {
        context: String,
        source: std::io::Error,
    },
    /// QEMU could not be started or exited before the guest became ready.
    QemuFailed { message: String, log_tail: String },
    /// The guest did not answer within the time limit; QEMU was killed.
    Timeout {
        phase: String,
        seconds: u64,
        log_tail: String,
    },
    /// The guest booted but reported that it could not set itself up: a kernel module, or
    /// DAX for the NVDIMM.
    GuestSetup { message: String, log_tail: String },
    /// The guest kernel panicked.
    GuestPanic { log_tail: String },
    /// A setup command (mkfs, mount, ...) failed in the guest.
    SetupFailed {
        command: String,
        exit_code: i32,
        output: String,
    },
    /// The guest answered something the serial protocol does not allow.
    Protocol(String),
}

impl VmError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        VmError::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmError::Config { path, message } => {
                write!(f, "invalid VM configuration {}: {message}", path.display())
            }
            VmError::Missing { what, hint } => write!(f, "{what} not found: {hint}"),
            VmError::Io { context, source } => write!(f, "{context}: {source}"),
            VmError::QemuFailed { message, log_tail } => {
                write!(f, "QEMU failed: {message}\n--- last console output ---\n{log_tail}")
            }
            VmError::Timeout { phase, seconds, log_tail } => write!(
                f,
                "the guest did not finish {phase} within {seconds} s and was killed\n\
                 --- last console output ---\n{log_tail}"
            ),
            VmError::GuestSetup { message, log_tail } => {
                write!(f, "{message}\n--- last console output ---\n{log_tail}")
            }
            VmError::GuestPanic { log_tail } => {
                write!(f, "the guest kernel panicked\n--- last console output ---\n{log_tail}")
            }
            VmError::SetupFailed { command, exit_code, output } => write!(
                f,
                "setup command `{command}` failed in the guest with exit code {exit_code}:\n{output}"
            ),
            VmError::Protocol(message) => write!(f, "serial console protocol error: {message}"),
        }
    }
}

impl std::error::Error for VmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            VmError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
