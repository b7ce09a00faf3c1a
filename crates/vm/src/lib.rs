//! Runs Persim's guest: a QEMU full-system VM (TCG, one vCPU) with an emulated NVDIMM,
//! booted from the installed Debian kernel and an initramfs Persim builds, driven over its
//! serial console, optionally with the tracing plugin loaded.

mod config;
mod console;
mod cpio;
mod error;
mod extract;
mod initramfs;
mod kernel;
mod qemu;
mod trace;

pub use config::{default_config_dir, VmConfig};
pub use console::{CommandOutput, Vm};
pub use error::VmError;
pub use extract::{extract_states, DumpOptions, ExtractMode, ExtractOptions};
pub use initramfs::{build_cached, InitramfsSpec};
pub use kernel::Kernel;
pub use qemu::{check_version, Plugin, QemuSpec, MIN_QEMU_MAJOR, PM_BASE};
pub use trace::{prepare, trace, Artifacts, Prepared, TraceOptions, TraceSummary};
