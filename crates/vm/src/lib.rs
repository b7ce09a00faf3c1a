//! Runs Persim's guest: a QEMU full-system VM (TCG, one vCPU) with an emulated NVDIMM,
//! booted from the installed Debian kernel and an initramfs Persim builds, driven over its
//! serial console, optionally with the tracing plugin loaded.
//!
//! The API is what the tester and the CLI use: [`trace`] a command, [`extract_states`] of
//! crash images. The parts below them (booting a [`Vm`] and running commands in it) are
//! public only with the `testing` feature, for this crate's integration tests.
//!
//! Modules and what each uses of the others (no cycle; `error` is used by nearly all and
//! left out):
//! - `record` (the tracing VM, `persim trace`): `boot`, `config`, `console`, `qemu`,
//!   `scratch`, `shell`, `symbols`
//! - `extract` (with `extract/worker`): `boot`, `config`, `console`, `qemu`, `recovered`,
//!   `scratch`, `shell`
//! - `symbols` (a recording's function symbols): `boot`, `console`
//! - `testing`: `boot`, `config`, `kernel`, `qemu`
//! - `boot` (kernel and initramfs of a boot): `config`, `initramfs`, `kernel`, `qemu`
//! - `console` (a running guest): `qemu`, `scratch`, `snapshot`
//! - `initramfs`: `cpio`, `kernel`
//! - `kernel`: `config`
//! - `qemu` (command line, version check): `snapshot`
//! - `config` (its unit tests use `kernel`), `cpio`, `recovered`, `scratch`, `shell`,
//!   `snapshot`: none

mod boot;
mod config;
mod console;
mod cpio;
mod error;
mod extract;
mod initramfs;
mod kernel;
mod qemu;
mod record;
mod recovered;
mod scratch;
mod shell;
mod snapshot;
mod symbols;
#[cfg(feature = "testing")]
pub mod testing;

pub use boot::Artifacts;
#[cfg(feature = "testing")]
pub use boot::{prepare, Prepared};
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
pub use record::{trace, TraceOptions, TraceSummary, TracingVm};
pub use recovered::{Outcome, Recovered};

#[cfg(feature = "testing")]
pub use console::{CommandOutput, Vm};
#[cfg(feature = "testing")]
pub use qemu::{Plugin, QemuSpec};
