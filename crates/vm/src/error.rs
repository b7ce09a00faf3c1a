//! Everything that can go wrong while preparing or running a VM, with messages that say
//! what to do about it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// A VM configuration file could not be read or is invalid.
    #[error("invalid VM configuration {}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    /// A component installed by scripts/setup.sh is missing or too old.
    #[error("{what} not found: {hint}")]
    Missing { what: String, hint: String },
    /// An I/O error while preparing the VM (initramfs, PM file, cache).
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// The file system of a scratch PM file cannot hold it (QEMU, mapping it, would die of
    /// SIGBUS at the first page it cannot back).
    #[error(
        "no space left on {device} for the scratch PM file in {} ({needed_mib} MiB needed, \
         {free_mib} MiB free): free space there, or set XDG_CACHE_HOME to a directory on a \
         larger file system",
        dir.display()
    )]
    NoSpace {
        device: String,
        dir: PathBuf,
        needed_mib: u64,
        free_mib: u64,
    },
    /// QEMU could not be started or exited before the guest became ready.
    #[error("QEMU failed: {message}\n--- last console output ---\n{log_tail}")]
    QemuFailed { message: String, log_tail: String },
    /// The guest did not answer within the time limit; QEMU was killed.
    #[error(
        "the guest did not finish {phase} within {seconds} s and was killed\n\
         --- last console output ---\n{log_tail}"
    )]
    Timeout {
        phase: String,
        seconds: u64,
        log_tail: String,
    },
    /// The guest booted but reported that it could not set itself up: a kernel module, or
    /// DAX for the NVDIMM.
    #[error("{message}\n--- last console output ---\n{log_tail}")]
    GuestSetup { message: String, log_tail: String },
    /// The guest kernel panicked.
    #[error("the guest kernel panicked\n--- last console output ---\n{log_tail}")]
    GuestPanic { log_tail: String },
    /// The guest kernel oopsed during a command; the guest is not to be trusted.
    #[error("the guest kernel oopsed\n--- console output ---\n{output}")]
    GuestOops { output: String },
    /// A setup command (mkfs, mount, ...) failed in the guest.
    #[error("setup command `{command}` failed in the guest with exit code {exit_code}:\n{output}")]
    SetupFailed {
        command: String,
        exit_code: i32,
        output: String,
    },
    /// A function named in `--trace-calls` is in none of the guest's programs and libraries.
    #[error(
        "function `{name}` (--trace-calls) is not in any program listed under `tools` in the \
         VM configuration or in their shared libraries ({searched}): check its spelling, or \
         add the program that has it to `tools`"
    )]
    UnknownFunction { name: String, searched: String },
    /// The guest answered something the serial protocol does not allow.
    #[error("serial console protocol error: {0}")]
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn every_message_says_what_happened_and_io_errors_keep_their_source() {
        let tail = || "last line".to_owned();
        let cases = [
            (
                VmError::Config {
                    path: "/vm/x.toml".into(),
                    message: "no name".into(),
                },
                "invalid VM configuration /vm/x.toml: no name",
            ),
            (
                VmError::Missing {
                    what: "qemu".into(),
                    hint: "install it".into(),
                },
                "qemu not found: install it",
            ),
            (
                VmError::io("reading x", std::io::Error::other("gone")),
                "reading x: gone",
            ),
            (
                VmError::QemuFailed {
                    message: "exit 1".into(),
                    log_tail: tail(),
                },
                "QEMU failed: exit 1\n--- last console output ---\nlast line",
            ),
            (
                VmError::Timeout {
                    phase: "the boot".into(),
                    seconds: 5,
                    log_tail: tail(),
                },
                "the guest did not finish the boot within 5 s and was killed\n\
                 --- last console output ---\nlast line",
            ),
            (
                VmError::GuestSetup {
                    message: "no DAX".into(),
                    log_tail: tail(),
                },
                "no DAX\n--- last console output ---\nlast line",
            ),
            (
                VmError::GuestPanic { log_tail: tail() },
                "the guest kernel panicked\n--- last console output ---\nlast line",
            ),
            (
                VmError::SetupFailed {
                    command: "mkfs".into(),
                    exit_code: 2,
                    output: "bad".into(),
                },
                "setup command `mkfs` failed in the guest with exit code 2:\nbad",
            ),
            (
                VmError::Protocol("two BEGINs".into()),
                "serial console protocol error: two BEGINs",
            ),
        ];
        for (error, message) in &cases {
            assert_eq!(error.to_string(), *message);
            let has_source = matches!(error, VmError::Io { .. });
            assert_eq!(error.source().is_some(), has_source, "{error:?}");
        }
    }
}
