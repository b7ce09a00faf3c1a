//! Code shared by Persim's own static guest tools (hypercall, fs-dump, fs-ops).

pub mod command_line;
pub mod fs_ops;
pub mod hypercall;
