//! Persim traces: the entries a traced run records, the human-readable text form
//! (shared/TRACE-TEXT.md) and the compact, compressed binary form.

mod entry;

pub use entry::{Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op};
