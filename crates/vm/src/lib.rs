//! Runs Persim's guest: a QEMU full-system VM (TCG, one vCPU) with an emulated NVDIMM,
//! booted from the installed Debian kernel and an initramfs Persim builds, driven over its
//! serial console, optionally with the tracing plugin loaded.
//!
//! The API is what the tester and the CLI use: one [`Machine`] (configuration, artifacts,
//! timeouts, cache directory, jobs) describes the guest, and each call adds only its own
//! arguments: [`trace`] a command (or record test after test in one [`TracingVm`]) with
//! [`RecordOptions`], [`extract_states`] of crash images (or keep an [`ExtractPool`]'s
//! guests across calls) with a [`DumpOptions`]. The parts below them (booting a `Vm` and
//! running commands in it, `QemuSpec`, `prepare`) are public only with the `testing`
//! feature, for the crates' integration tests.
//!
//! Modules and what each uses of the others (no cycle; `error` is used by nearly all and
//! left out). "Trace" names a file format (`persim-trace`) and a CLI command, so the
//! module that makes traces is `record`:
//! - `record` (the tracing VM): `boot`, `calls`, `console`, `machine`, `qemu`, `scratch`,
//!   `shell`, `symbols`
//! - `calls` (the functions whose calls are traced): `initramfs`
//! - `extract` (with `extract/worker`): `boot`, `console`, `machine`, `qemu`,
//!   `scratch`, `shell`
//! - `symbols` (a recording's function symbols): `boot`, `console`
//! - `machine` (the machine description): `boot`, `config`
//! - `testing`: `boot`, `config`, `kernel`, `qemu`
//! - `boot` (kernel and initramfs of a boot): `config`, `initramfs`, `kernel`, `qemu`
//! - `console` (a running guest): `qemu`, `scratch`, `snapshot`
//! - `initramfs`: `cpio`, `kernel`
//! - `kernel`: `config`
//! - `qemu` (command line, version check): `snapshot`
//! - `cache` (what the cache directory holds), `config` (its unit tests use `kernel`),
//!   `cpio`, `scratch`, `shell`, `snapshot`: none

mod boot;
mod cache;
mod calls;
mod config;
mod console;
mod cpio;
mod error;
mod extract;
mod initramfs;
mod kernel;
mod machine;
mod qemu;
mod record;
mod scratch;
mod shell;
mod snapshot;
mod symbols;
#[cfg(feature = "testing")]
pub mod testing;

pub use boot::Artifacts;
#[cfg(feature = "testing")]
pub use boot::{prepare, Prepared};
pub use cache::{cache_entries, prune_cache, CacheEntry};
#[cfg(feature = "testing")]
pub use config::default_config_dir;
pub use config::VmConfig;
pub use error::VmError;
pub use extract::{extract_states, DumpOptions, ExtractMode, ExtractPool, Extracted};
pub use kernel::Kernel;
pub use machine::Machine;
pub use persim_abi::Stacks;
pub use qemu::check_version;
pub use record::{trace, RecordOptions, TraceSummary, TracingVm};

#[cfg(feature = "testing")]
pub use console::{CommandOutput, Vm};
#[cfg(feature = "testing")]
pub use qemu::{Plugin, QemuSpec};
