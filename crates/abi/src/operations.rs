//! The lines that mark a test's operations in what the guest prints: the traced shell
//! script of `ops` and `fs-ops calls` print them, and the tester splits the output by them
//! and names the operation that failed.

/// Printed as operation N starts: `@@PERSIM-OP N`.
pub const OPERATION_STARTS: &str = "@@PERSIM-OP ";

/// Printed when operation N fails: `persim: operation N failed (exit code C)`.
pub const OPERATION_FAILED: &str = "persim: operation";
