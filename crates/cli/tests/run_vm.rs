//! `persim run` and `persim report` end to end in the real VM (QEMU, Debian kernel,
//! ext4-DAX). Skipped with a message when those are not installed, except under CI.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// Whether the VM can run here; under CI it must.
fn vm_ready(test: &str) -> bool {
    let missing = persim_vm::check_version()
        .err()
        .map(|e| e.to_string())
        .or_else(|| {
            persim_vm::Kernel::find_installed()
                .err()
                .map(|e| e.to_string())
        })
        .or_else(|| persim_vm::Artifacts::locate().err().map(|e| e.to_string()));
    match missing {
        None => true,
        Some(reason) if std::env::var_os("CI").is_some() => {
            panic!("{test}: {reason}; CI must run the VM tests: run scripts/setup.sh")
        }
        Some(reason) => {
            eprintln!("SKIPPED {test}: {reason} (run scripts/setup.sh)");
            false
        }
    }
}

fn persim(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("persim")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

fn report(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn hello_world_is_atomic_on_ext4_dax() {
    if !vm_ready("hello_world_is_atomic_on_ext4_dax") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "hello-world",
        "--out",
        o,
        "-q",
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let r = report(&out);
    assert_eq!(
        (r["test"].as_str(), r["fs"].as_str()),
        (Some("hello-world"), Some("ext4-dax"))
    );
    let interval = &r["checkpoints"][0];
    assert_eq!(
        (interval["from"].as_u64(), interval["to"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(interval["atomic"], true);
    let states = interval["states"].as_array().unwrap();
    assert_eq!(states.len(), 2, "before and after the write: {interval}");
    assert_eq!(interval["final_states"], serde_json::json!(["c1s1"]));
    for stage in [
        "trace.ptrace",
        "trace.ptrace.initial",
        "images.json",
        "images/index.json",
        "report.txt",
    ] {
        assert!(out.join(stage).is_file(), "{stage}");
    }
    // the evidence: the new state has the file with its contents
    let diff = persim(&["report", o, "--diff"]);
    assert_eq!(diff.status.code(), Some(0));
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(text.contains("checkpoint 1 -> 2: atomic"), "{text}");
    let final_image = states[1]["images"][0].as_str().unwrap();
    let state =
        std::fs::read_to_string(out.join("states").join(format!("{final_image}.json"))).unwrap();
    assert!(
        state.contains("/mnt/myfile") && state.contains("HelloWorld\\\\n"),
        "{state}"
    );
    // a second run of the same directory resumes: nothing is recorded again
    let again = persim(&["run", "--fs", "ext4", "--test", "hello-world", "--out", o]);
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stderr).contains("reusing the recorded trace"));
    assert_eq!(report(&out)["checkpoints"], r["checkpoints"]);
}

#[test]
fn two_durable_steps_in_one_interval_are_not_atomic() {
    if !vm_ready("two_durable_steps_in_one_interval_are_not_atomic") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let test = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/two-steps.toml");
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        test.to_str().unwrap(),
        "--out",
        o,
        "-q",
    ]);
    assert_eq!(
        run.status.code(),
        Some(1),
        "violations found: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let interval = &report(&out)["checkpoints"][0];
    assert_eq!(interval["atomic"], false);
    assert_eq!(interval["single_final_state"], true);
    assert!(
        interval["states"].as_array().unwrap().len() >= 3,
        "{interval}"
    );
    let diff = persim(&["report", o, "--diff", "--failure-points"]);
    assert_eq!(diff.status.code(), Some(1));
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        text.contains("VIOLATION: not atomic") && text.contains("+   \"/mnt/first\""),
        "{text}"
    );
}

/// The correct ring buffer in the VM: under `global-prefix`, which reorders lines, every
/// append of every ringbuf test is atomic with one final state, in both cache modes, and
/// each interval's final state holds one entry more than its first.
#[test]
fn ringbuf_suite_is_atomic_in_both_cache_modes() {
    if !vm_ready("ringbuf_suite_is_atomic_in_both_cache_modes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for cache in ["volatile", "persistent"] {
        let out = dir.path().join(cache);
        let suite = persim(&[
            "suite",
            "ringbuf",
            "--fs",
            "ext4",
            "--cache",
            cache,
            "--strategy",
            "global-prefix",
            "--out",
            out.to_str().unwrap(),
        ]);
        let results: Value =
            serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
        let tests = results["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 4, "{results}");
        for test in tests {
            assert_eq!(test["mark"], "✓", "{cache}: {test}");
            let name = test["test"].as_str().unwrap();
            let report = report(&out.join(name));
            let intervals = report["checkpoints"].as_array().unwrap();
            assert!(intervals.len() >= 2, "{cache} {name}: {report}");
            for interval in intervals {
                let entries = |state: &str| {
                    let hash = interval["states"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["name"] == state)
                        .unwrap()["images"][0]
                        .as_str()
                        .unwrap()
                        .to_string();
                    let recovered: Value = serde_json::from_slice(
                        &std::fs::read(out.join(name).join(format!("states/{hash}.json"))).unwrap(),
                    )
                    .unwrap();
                    let dump: Value =
                        serde_json::from_str(recovered["dump"].as_str().unwrap()).unwrap();
                    dump["entries"].as_array().unwrap().len()
                };
                let first = interval["states"][0]["name"].as_str().unwrap();
                let last = interval["final_states"][0].as_str().unwrap();
                assert_eq!(
                    entries(last),
                    entries(first) + 1,
                    "{cache} {name}: {interval}"
                );
            }
        }
        assert_eq!(suite.status.code(), Some(0), "{cache}: {results}");
    }
}
