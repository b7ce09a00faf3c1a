//! Code shared by Persim's static guest tools.

pub mod dax;
pub mod hypercall;
pub mod json;
