//! The Persim crash model (shared/MODEL.md): replaying a trace, keeping the pending state,
//! and choosing which crash images each strategy materialises.

mod origin;

pub use origin::{Choice, FailureKind, FailurePoint, Origin};
