//! What the command-line tests share (each test crate uses a part of it).
#![allow(dead_code)]

use assert_cmd::Command;

/// A file of this crate's tests/data.
pub fn data(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

/// Runs the `persim` binary of this build with `args` and returns what it did.
pub fn persim(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("persim")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

/// Whether the VM can run here (ext4-DAX's configuration); under CI it must.
pub fn vm_ready(test: &str) -> bool {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/ext4-dax.toml");
    persim_vm::testing::vm_ready(test, &persim_vm::VmConfig::load(&config).unwrap()).is_some()
}

/// `persim run --fs ext4` of `tests/data/<file>` with `extra` arguments, into `out`.
pub fn run_test_file(file: &str, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let test = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    run_test(&test, out, extra)
}

/// `persim run --fs ext4` of the test file `test` with `extra` arguments, into `out`.
pub fn run_test(
    test: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["run", "--fs", "ext4", "--test", test.to_str().unwrap()];
    args.extend(extra);
    args.extend(["--out", out.to_str().unwrap(), "-q"]);
    persim(&args)
}

/// `persim run --vm CONFIG --test TEST` (a test file or a suite's test name) with `extra`
/// arguments, into `out`.
pub fn run_on_vm(
    config: &std::path::Path,
    test: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["run", "--vm", config.to_str().unwrap(), "--test", test];
    args.extend(extra);
    args.extend(["--out", out.to_str().unwrap(), "-q"]);
    persim(&args)
}
