//! `persim faults` end to end: a hello-world run on ext4-DAX, faults injected into its final
//! image and recovered in the VM (skipped with a message where the VM cannot run, except
//! under CI); and the errors of bad input, which need no VM.

mod common;

use common::{persim, vm_ready};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every file under `dir` (but `skip`) with its contents.
fn files(dir: &Path, skip: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path == skip {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
            } else {
                let contents = std::fs::read(&path).unwrap();
                all.insert(path.display().to_string(), contents);
            }
        }
    }
    all
}

#[test]
fn faults_in_hello_worlds_final_image_are_judged_and_its_run_is_left_alone() {
    if !vm_ready("faults_in_hello_worlds_final_image_are_judged_and_its_run_is_left_alone") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let r = run_dir.to_str().unwrap();
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "hello-world",
        "--out",
        r,
        "-q",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let before = files(&run_dir, &run_dir.join("faults"));
    // The page the DAX copy wrote "HelloWorld" to, zeroed: the file reads back zeros, a
    // silent fault (exit 1); and bit flips in the metadata the test wrote.
    let faults = |extra: &[&str]| {
        let mut args = vec![
            "faults",
            r,
            "--kind",
            "page,bitflip",
            "--where",
            "data,metadata",
        ];
        args.extend(["--count", "2", "--seed", "3", "-q"]);
        args.extend(extra);
        persim(&args)
    };
    let first = faults(&[]);
    let out = text(&first);
    assert_eq!(first.status.code(), Some(1), "{out}");
    assert!(out.contains("silent in final (data): page at PM"), "{out}");
    assert!(out.contains("dax_iomap_rw"), "the DAX copy wrote it: {out}");
    assert!(out.contains("HelloWorld"), "the state diff: {out}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("faults/faults.json")).unwrap())
            .unwrap();
    let faults_json = report["faults"].as_array().unwrap();
    // 1 page of data holds 1 distinct page fault; 2 of each other kind and place.
    let place_kind = |f: &Value| format!("{} {}", f["place"], f["fault"]["kind"]);
    let listed: Vec<String> = faults_json.iter().map(place_kind).collect();
    assert_eq!(
        listed
            .iter()
            .filter(|p| p.as_str() == "\"data\" \"page\"")
            .count(),
        1,
        "{listed:?}"
    );
    assert_eq!(faults_json.len(), 7, "{listed:?}");
    for f in faults_json {
        let outcome = f["outcome"].as_str().unwrap();
        assert!(
            ["masked", "corrected", "detected", "silent", "crash"].contains(&outcome),
            "{f}"
        );
        assert_ne!(outcome, "crash", "a kernel oops on a corrupted image: {f}");
    }
    for file in ["summary.txt", "summary.svg"] {
        assert!(run_dir.join("faults").join(file).is_file(), "{file}");
    }
    assert!(
        !run_dir.join("faults/images").exists(),
        "corrupted images left behind"
    );
    assert_eq!(
        files(&run_dir, &run_dir.join("faults")),
        before,
        "the run was modified"
    );
    // Again: every state is known, nothing is recovered, the same results.
    let again = faults(&["--json"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let printed: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(printed, report);
}

/// XFS takes a log record whose CRC fails for a torn write, truncates the log there and
/// mounts: the state may even be right, but the kernel said so, and that is detection,
/// quoted from the kernel log (without reading it, these faults were silent or masked).
#[test]
fn a_checksum_message_in_the_kernel_log_counts_as_detected() {
    if !vm_ready("a_checksum_message_in_the_kernel_log_counts_as_detected") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let r = run_dir.to_str().unwrap();
    let run = persim(&[
        "run",
        "--fs",
        "xfs",
        "--test",
        "hello-world",
        "--out",
        r,
        "-q",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    // Every metadata byte hello-world writes on XFS is in its log.
    let faults = persim(&[
        "faults", r, "--kind", "bitflip", "--where", "metadata", "--count", "3", "--seed", "3",
        "-q",
    ]);
    let out = text(&faults);
    let report: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("faults/faults.json")).unwrap())
            .unwrap();
    let detected: Vec<&Value> = (report["faults"].as_array().unwrap().iter())
        .filter(|f| f["outcome"] == "detected")
        .collect();
    assert!(!detected.is_empty(), "{out}\n{report:#}");
    for f in &detected {
        let detail = f["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("XFS (pmem0): ") && detail.contains("CRC"),
            "the kernel's message quoted: {f}"
        );
    }
}

#[test]
fn a_directory_without_a_trace_and_a_bad_kind_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let none = persim(&["faults", d]);
    assert_eq!(none.status.code(), Some(2), "{}", text(&none));
    assert!(
        text(&none).contains("not a run directory"),
        "{}",
        text(&none)
    );
    assert!(!dir.path().join("faults").exists());
    let bad = persim(&["faults", d, "--kind", "scribble:0"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad).contains("give bitflip, scribble:N"),
        "{}",
        text(&bad)
    );
    let bad = persim(&["faults", d, "--where", "inode"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad).contains("expected written, metadata, data or any"),
        "{}",
        text(&bad)
    );
}

/// A run directory made on a configuration of the user's own, as `persim run --vm FILE`
/// leaves it (no trace: these tests stop before any VM runs).
fn run_on_own_config(root: &Path, recovery_key: &str) -> std::path::PathBuf {
    let vm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/ext4-dax.toml");
    let config = root.join("configs/mine.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let extends = vm.with_extension("");
    std::fs::write(
        &config,
        format!("extends = \"{}\"\nname = \"mine\"\n", extends.display()),
    )
    .unwrap();
    let run = root.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("test.toml"),
        "description = \"x\"\nops = [\"true\"]\n",
    )
    .unwrap();
    let inputs = serde_json::json!({
        "persim": "0", "test": "x", "machine": "mine", "strategy": "program-order",
        "cache": "volatile", "max_images": 100, "trace_key": "", "images_key": "",
        "states_key": "", "recovery_key": recovery_key, "config_file": config,
    });
    std::fs::write(run.join("inputs.json"), inputs.to_string()).unwrap();
    run
}

/// Without --vm, `persim faults` recovers on the configuration file the run was made with
/// (it was looked for only as vm/<name>.toml); a machine that recovers otherwise than the
/// run's is refused before anything is written.
#[test]
fn faults_recover_on_the_runs_own_configuration_and_refuse_another() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_on_own_config(dir.path(), "");
    let r = run.to_str().unwrap();
    let found = persim(&["faults", r, "-q"]);
    assert_eq!(found.status.code(), Some(2), "{}", text(&found));
    assert!(
        text(&found).contains("holds no recorded trace"),
        "the configuration was found, the trace is what is missing: {}",
        text(&found)
    );
    std::fs::remove_dir_all(run.join("faults")).unwrap();
    let run = run_on_own_config(dir.path(), "0000");
    let refused = persim(&["faults", r, "-q"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("with another configuration, kernel or guest tools"),
        "{}",
        text(&refused)
    );
    assert!(
        !run.join("faults").exists(),
        "a refused campaign left its directory"
    );
}
