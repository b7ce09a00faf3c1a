//! An installed `persim` (scripts/install.sh PREFIX) works outside its source tree: it
//! finds its suites, VM configurations, plugin and guest tools through its home.

use std::path::Path;
use std::process::Command;

#[test]
fn an_installed_persim_runs_a_test_from_another_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = persim_vm::VmConfig::load(&root.join("vm/ext4-dax.toml")).unwrap();
    if persim_vm::testing::vm_ready(
        "an_installed_persim_runs_a_test_from_another_directory",
        &config,
    )
    .is_none()
    {
        return;
    }
    let prefix = tempfile::tempdir().unwrap();
    let install = Command::new("bash")
        .arg(root.join("scripts/install.sh"))
        .arg(prefix.path())
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    // Programs under test include it from the prefix.
    assert_eq!(
        std::fs::read(prefix.path().join("include/persim.h")).unwrap(),
        std::fs::read(root.join("include/persim.h")).unwrap()
    );

    let elsewhere = tempfile::tempdir().unwrap();
    let persim = |args: &[&str]| {
        Command::new(prefix.path().join("bin/persim"))
            .args(args)
            .current_dir(elsewhere.path())
            .env_remove("PERSIM_HOME")
            .output()
            .unwrap()
    };
    let unknown = persim(&["run", "--fs", "ext4", "--test", "nope", "--out", "r"]);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("hello-world") && stderr.contains("rename-overwrite"),
        "{stderr}"
    );

    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "hello-world",
        "--out",
        "run",
        "-q",
    ]);
    // The report too: a violation here (exit 1) must say which states it found.
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(elsewhere.path().join("run/report.json").is_file());
}
