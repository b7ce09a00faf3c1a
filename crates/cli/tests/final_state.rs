//! Is the final state right? `--reference CONFIG` and a test's `expect`, end to end in the
//! real VM (ext4-DAX, XFS-DAX as the reference); bad input refused before any VM boots.

mod common;

use common::{data, persim, vm_ready};
use serde_json::Value;
use std::path::Path;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn source_tree(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
        .to_str()
        .unwrap()
        .to_owned()
}

fn printed(run: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    )
}

/// Two correct file systems agree on the append: ext4-DAX's final state is XFS-DAX's,
/// though inode numbers, block counts, times and the root directory's size and link
/// count differ between them.
#[test]
fn an_append_on_ext4_dax_is_as_on_the_xfs_dax_reference() {
    if !vm_ready("an_append_on_ext4_dax_is_as_on_the_xfs_dax_reference") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let xfs = source_tree("vm/xfs-dax.toml");
    let args = [
        "run",
        "--fs",
        "ext4",
        "--test",
        "append",
        "--reference",
        &xfs,
    ];
    let run = persim(&[&args[..], &["--out", out.to_str().unwrap(), "-q"]].concat());
    assert_eq!(run.status.code(), Some(0), "{}", printed(&run));
    let report = json(&out.join("report.json"));
    let interval = &report["checkpoints"][0];
    assert_eq!(
        interval["reference"],
        serde_json::json!({"against": "xfs-dax", "differs": []}),
        "{interval:#}"
    );
    assert!(String::from_utf8_lossy(&run.stdout)
        .contains("checkpoint 1 -> 2: atomic, final state as on the reference"));
    let inputs = json(&out.join("inputs.json"));
    assert_eq!(inputs["reference"], "xfs-dax");
    // The reference's state is XFS's own: the fields left out do differ.
    let states = json(&out.join("reference/states.json"));
    let xfs_state: Value =
        serde_json::from_str(states["at"]["2"]["dump"].as_str().unwrap()).unwrap();
    assert_eq!(xfs_state["/mnt/myfile"]["contents"], "Hello\nWorld\n");
    let final_hash = interval["states"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == interval["final_states"][0])
        .unwrap()["images"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let saved = json(&out.join(format!("states/{final_hash}.json")));
    let ext4_state: Value = serde_json::from_str(saved["dump"].as_str().unwrap()).unwrap();
    for (path, field) in [("/mnt/myfile", "ino"), ("/mnt", "size"), ("/mnt", "nlink")] {
        assert_ne!(
            ext4_state[path][field], xfs_state[path][field],
            "{path} {field}: {ext4_state:#} {xfs_state:#}"
        );
    }
    assert!(
        !out.join("reference/trace.ptrace").exists(),
        "only the reference's states are kept"
    );
}

/// A campaign over a test whose expected contents are wrong for ext4-DAX (what a file
/// system that ignores O_APPEND leaves) and an ACE-generated test, with XFS-DAX as the
/// reference: the wrong expectation is its own verdict, mark and problem, exit code 1;
/// the generated test gets the reference check and passes it.
#[test]
fn a_wrong_final_state_is_its_own_verdict_in_a_campaign_with_a_reference() {
    if !vm_ready("a_wrong_final_state_is_its_own_verdict_in_a_campaign_with_a_reference") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("tests");
    let generated = dir.path().join("ace");
    let run = persim(&[
        "generate",
        "ace",
        "--seq",
        "1",
        "--out",
        generated.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", printed(&run));
    std::fs::create_dir(&tests).unwrap();
    let ace = "seq1-00007-write-foo-100-3000.toml";
    std::fs::copy(generated.join(ace), tests.join(ace)).unwrap();
    let wrong = "append-expect-wrong.toml";
    std::fs::copy(data(wrong), tests.join(wrong)).unwrap();

    let out = dir.path().join("campaign");
    let xfs = source_tree("vm/xfs-dax.toml");
    let run = persim(&[
        "campaign",
        "run",
        tests.to_str().unwrap(),
        "--fs",
        "ext4",
        "--reference",
        &xfs,
        "--out",
        out.to_str().unwrap(),
        "-j",
        "2",
        "-q",
    ]);
    let text = printed(&run);
    assert_eq!(run.status.code(), Some(1), "{text}");
    let results = json(&out.join("results.json"));
    assert_eq!(results["reference"], "xfs-dax");
    let result = |name: &str| {
        results["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["test"] == name)
            .unwrap()
            .clone()
    };
    let wrong_result = result("append-expect-wrong");
    assert_eq!(wrong_result["mark"], "R", "{text}");
    assert_eq!(
        wrong_result["signature"], "R final state differs from expected in contents",
        "{text}"
    );
    assert!(
        text.contains("R final state differs from expected in contents"),
        "{text}"
    );
    assert!(text.contains("against reference xfs-dax"), "{text}");

    let report = json(&out.join("append-expect-wrong/report.json"));
    let interval = &report["checkpoints"][0];
    assert_eq!(interval["atomic"], true, "{interval:#}");
    assert_eq!(
        interval["expected"]["differs"][0]["fields"],
        serde_json::json!(["contents"])
    );
    assert_eq!(interval["reference"]["differs"], serde_json::json!([]));
    let report_text = std::fs::read_to_string(out.join("append-expect-wrong/report.txt")).unwrap();
    assert!(
        report_text.contains("VIOLATION: final state differs from expected")
            && report_text.contains(
                "      -     \"contents\": \"World\\n\"\n      +     \"contents\": \"Hello\\nWorld\\n\"\n"
            ),
        "{report_text}"
    );

    // The generated test was compared with the reference too, and agrees with it.
    let ace_report = json(&out.join("seq1-00007-write-foo-100-3000/report.json"));
    for interval in ace_report["checkpoints"].as_array().unwrap() {
        assert_eq!(
            interval["reference"]["differs"],
            serde_json::json!([]),
            "{interval:#}"
        );
    }
}

/// Bad input is refused with what to do, exit code 2, before a VM boots.
#[test]
fn an_unknown_reference_or_a_malformed_expectation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "append",
        "--reference",
        "nosuchfs",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(run.status.code(), Some(2), "{}", printed(&run));
    assert!(
        String::from_utf8_lossy(&run.stderr)
            .contains("--reference nosuchfs: give a file system as --fs takes it (ext4, xfs)"),
        "{}",
        printed(&run)
    );
    let test = dir.path().join("bad.toml");
    std::fs::write(
        &test,
        "description = \"x\"\nops = [\"true\"]\n[expect.2]\n\"/mnt/f\" = \"a\"\n",
    )
    .unwrap();
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        test.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(run.status.code(), Some(2), "{}", printed(&run));
    assert!(
        String::from_utf8_lossy(&run.stderr)
            .contains("`expect.2` names operation 2, but the test has 1 operation(s)"),
        "{}",
        printed(&run)
    );
}
