//! What two sides of Persim must agree on, in one dependency-free place: the static guest
//! tools, the QEMU tracing plugin and the host-side tester all use it.
//!
//! - [`hypercall`]: how the guest's `hypercall` tool signals the plugin (guest ↔ plugin);
//! - [`PluginArgs`]: the plugin's `-plugin` arguments (host ↔ plugin);
//! - [`calls`]: the functions whose calls the plugin records (host ↔ plugin);
//! - [`Counts`]: what the plugin's counting mode counts, and its file (plugin → host);
//! - [`machine`]: the guest-physical PM base and the kernel command line the plugin's
//!   address arithmetic relies on (host ↔ plugin);
//! - [`RECOVERY_EPOCH`]: the clock every recovery runs on, and how a state tells the
//!   timestamps recovery wrote (extraction guest ↔ host);
//! - [`operations`]: the lines that mark a test's operations in the guest's output
//!   (guest ↔ tester).

pub mod calls;
mod counts;
pub mod hypercall;
pub mod machine;
pub mod operations;
mod plugin_args;

pub use counts::Counts;
pub use plugin_args::{PluginArgs, Stacks};

/// Fields of an `fs-dump` record that a test may leave out (`ignore = [...]`), checked on
/// the host before a VM boots and by `fs-dump --ignore` in the guest.
pub const FS_DUMP_FIELDS: [&str; 15] = [
    "atime", "blocks", "contents", "ctime", "gid", "ino", "mode", "mtime", "nlink", "rdev", "size",
    "target", "type", "uid", "xattrs",
];

/// The `fs-dump` fields that are timestamps (`SECONDS.NANOSECONDS`).
pub const FS_DUMP_TIMES: [&str; 3] = ["atime", "ctime", "mtime"];

/// The instant every recovery starts at, in seconds since 1970 (2037-01-01T00:00:00Z):
/// the extraction worker sets the guest's clock to it before each image's recovery, so
/// that the time recovery writes does not depend on the guest's age. It is later than
/// anything a traced run writes (its guest's clock starts at 2026-01-01 and runs with the
/// VM) and below 2^31, which file systems with 32-bit timestamps still hold. A timestamp
/// at or after it in a recovered state was written by recovery.
pub const RECOVERY_EPOCH: i64 = 2_114_380_800;

/// What a state says for a timestamp that recovery wrote.
pub const SET_BY_RECOVERY: &str = "set by recovery";
