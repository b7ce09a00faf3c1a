//! Code shared by Persim's own static guest tools (hypercall, fs-dump).

pub mod command_line;
pub mod hypercall;
