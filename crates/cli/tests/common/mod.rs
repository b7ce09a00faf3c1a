//! What the command-line tests share.

use assert_cmd::Command;

/// Runs the `persim` binary of this build with `args` and returns what it did.
pub fn persim(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("persim")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}
