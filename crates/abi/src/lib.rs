//! What two sides of Persim must agree on, in one dependency-free place: the static guest
//! tools, the QEMU tracing plugin and the host-side tester all use it.
//!
//! - [`hypercall`]: how the guest's `hypercall` tool signals the plugin (guest ↔ plugin);
//! - [`PluginArgs`]: the plugin's `-plugin` arguments (host ↔ plugin);
//! - [`machine`]: the guest-physical PM base and the kernel command line the plugin's
//!   address arithmetic relies on (host ↔ plugin).

pub mod hypercall;
pub mod machine;
mod plugin_args;

pub use plugin_args::{PluginArgs, Stacks};

/// Fields of an `fs-dump` record that a test may leave out (`ignore = [...]`), checked on
/// the host before a VM boots and by `fs-dump --ignore` in the guest.
pub const FS_DUMP_FIELDS: [&str; 15] = [
    "atime", "blocks", "contents", "ctime", "gid", "ino", "mode", "mtime", "nlink", "rdev", "size",
    "target", "type", "uid", "xattrs",
];
