//! Runs Persim's guest: a QEMU full-system VM (TCG, one vCPU) with an emulated NVDIMM,
//! booted from the installed Debian kernel and an initramfs Persim builds, driven over its
//! serial console, optionally with the tracing plugin loaded.
//!
//! The API is what the tester and the CLI use: [`trace`] a command, [`extract_states`] of
//! crash images. The parts below them (booting a [`Vm`] and running commands in it) are
//! public only with the `testing` feature, for this crate's integration tests.

mod config;
mod console;
mod cpio;
mod error;
mod extract;
mod initramfs;
mod kernel;
mod qemu;
mod scratch;
mod snapshot;
#[cfg(feature = "testing")]
pub mod testing;
mod trace;

#[cfg(feature = "testing")]
pub use config::default_config_dir;
pub use config::VmConfig;
pub use error::VmError;
pub use extract::{
    extract_states, DumpOptions, ExtractMode, ExtractOptions, ExtractPool, Extracted,
};
pub use kernel::Kernel;
pub use persim_abi::Stacks;
pub use qemu::check_version;
pub use trace::{trace, Artifacts, TraceOptions, TraceSummary, TracingVm};

#[cfg(feature = "testing")]
pub use console::{CommandOutput, Vm};
#[cfg(feature = "testing")]
pub use qemu::{Plugin, QemuSpec};
#[cfg(feature = "testing")]
pub use trace::{prepare, Prepared};
