//! `persim run` on a kernel the VM configuration names (vm/ext4-dax-6.12.toml: Debian's
//! 6.12 kernel, unpacked by scripts/setup.sh next to the installed one). Skipped with a
//! message when it is not there, except under CI.

use assert_cmd::Command;
use persim_vm::VmConfig;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn config_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/ext4-dax-6.12.toml")
}

/// Whether the VM can run here with the configuration's kernel; under CI it must.
fn vm_ready(test: &str) -> bool {
    persim_vm::testing::vm_ready(test, &VmConfig::load(&config_path()).unwrap()).is_some()
}

#[test]
fn hello_world_is_atomic_on_ext4_dax_with_the_6_12_kernel() {
    if !vm_ready("hello_world_is_atomic_on_ext4_dax_with_the_6_12_kernel") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = Command::cargo_bin("persim")
        .unwrap()
        .args(["run", "--vm"])
        .arg(config_path())
        .args(["--test", "hello-world", "--out"])
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap();
    // the report is on stdout: a violation must show its states and recovery errors
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let r: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        (r["test"].as_str(), r["fs"].as_str()),
        (Some("hello-world"), Some("ext4-dax-6.12"))
    );
    let interval = &r["checkpoints"][0];
    assert_eq!(
        (interval["from"].as_u64(), interval["to"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(interval["atomic"], true, "{interval}");
    assert_eq!(
        interval["states"].as_array().map(Vec::len),
        Some(2),
        "before and after the write: {interval}"
    );
    // and the guest did run the configuration's kernel, not the installed one
    let trace = Command::cargo_bin("persim")
        .unwrap()
        .args(["trace", "--vm"])
        .arg(config_path())
        .args(["--cmd", "uname -r", "-q", "-o"])
        .arg(dir.path().join("uname.ptrace"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&trace.stdout);
    assert!(
        trace.status.success() && stdout.starts_with("6.12."),
        "{stdout}{}",
        String::from_utf8_lossy(&trace.stderr)
    );
}
