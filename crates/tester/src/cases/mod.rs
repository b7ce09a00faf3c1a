//! What a test is, apart from how it runs: the test format and suites (`testcase`), and the
//! ACE generator that writes bounded sequences of file-system operations as tests (`ace`).

pub mod ace;
mod testcase;

pub use testcase::{Suite, TestCase};
