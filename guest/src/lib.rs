//! Code shared by Persim's static guest tools.

pub mod hypercall;
