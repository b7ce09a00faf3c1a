//! Code shared by Persim's own static guest tools (hypercall, fs-dump, fs-ops, fw-cfg, stay-busy, user-maps).

pub mod command_line;
pub mod fs_ops;
pub mod fw_cfg;
pub mod hypercall;
pub mod user_maps;
