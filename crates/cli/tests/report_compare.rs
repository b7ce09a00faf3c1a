//! `persim report DIR --compare OTHER` on two hand-made run directories of one test: the
//! states each recovered, matched by what they recovered to (not by image or name), the
//! exit code saying whether DIR has every state of OTHER, each run's images and sampled
//! failure points; two runs of different tests are refused with exit code 2.

mod common;

use common::persim;
use serde_json::{json, Value};
use std::path::Path;

/// A run directory of `test` whose interval 1 -> 2 has one state per list of images;
/// image `h` recovered to `recovered[h]`. `sampled`: its failure point was sampled.
fn run_dir(dir: &Path, test: &str, states: &[&[&str]], sampled: bool) {
    let recovered = |h: &str| match h {
        "torn" => json!({"outcome": "recovery-error", "output": "bad superblock checksum"}),
        h => json!({"outcome": "state", "dump": format!("{{\"file\": \"{}\"}}", &h[..1])}),
    };
    std::fs::create_dir_all(dir.join("states")).unwrap();
    let mut images = serde_json::Map::new();
    let states: Vec<Value> = (states.iter().enumerate())
        .map(|(k, hashes)| {
            for h in *hashes {
                images.insert(h.to_string(), json!({}));
                let state = dir.join("states").join(format!("{h}.json"));
                std::fs::write(state, recovered(h).to_string()).unwrap();
            }
            json!({"name": format!("c1s{k}"), "outcome": "state", "partial_only": false,
                   "failure_points": [1], "images": hashes})
        })
        .collect();
    let report = json!({
        "test": test, "fs": "ext4-dax", "cache": "volatile", "strategy": "global-prefix",
        "checkpoints": [{"from": 1, "to": 2, "states": states, "final_states": ["c1s0"],
                         "single_final_state": true, "atomic": true, "errors": []}],
        "timings": {}
    });
    std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
    let index = json!({
        "failure_points": [{"index": 1, "kind": "checkpoint", "checkpoint": 1,
                            "images": images.keys().collect::<Vec<_>>(), "incomplete": sampled}],
        "images": images,
    });
    std::fs::write(dir.join("images.json"), index.to_string()).unwrap();
}

fn compare(here: &Path, there: &Path, json: bool) -> (Option<i32>, String) {
    let (a, b) = (here.to_str().unwrap(), there.to_str().unwrap());
    let out = match json {
        true => persim(&["report", a, "--compare", b, "--json"]),
        false => persim(&["report", a, "--compare", b]),
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.code(),
        text + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn a_run_covers_another_when_it_has_every_state_the_other_recovered() {
    let tmp = tempfile::tempdir().unwrap();
    let (narrow, wide) = (tmp.path().join("program"), tmp.path().join("all"));
    // "a1" and "a2" recover to the same state; "torn" is a failed mount
    run_dir(&narrow, "touch", &[&["a1"], &["b1"], &["c1"]], false);
    run_dir(&wide, "touch", &[&["b2"], &["a2"], &["torn"]], true);
    let (code, text) = compare(&narrow, &wide, false);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("checkpoint 1 -> 2: 3 / 3, only here: c1s2, only there: c1s2"),
        "{text}"
    );
    assert!(
        text.contains("3 images, 1 failure points (none sampled)"),
        "{text}"
    );
    assert!(
        text.contains("3 images, 1 failure points (sampled at 1)"),
        "{text}"
    );
    assert!(text.contains("lacks 1 state(s)"), "{text}");

    // once the narrow run also has the failed mount, it covers the wide one
    run_dir(
        &narrow,
        "touch",
        &[&["a1"], &["b1"], &["c1"], &["torn"]],
        false,
    );
    let (code, text) = compare(&narrow, &wide, true);
    assert_eq!(code, Some(0), "{text}");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["covers"], true);
    assert_eq!(value["there"]["sampled"], 1);
    assert_eq!(value["intervals"][0]["only_here"], json!(["c1s2"]));
    assert_eq!(value["intervals"][0]["only_there"], json!([]));
}

#[test]
fn runs_of_different_tests_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    run_dir(&a, "touch", &[&["a1"]], false);
    run_dir(&b, "link", &[&["a1"]], false);
    let (code, text) = compare(&a, &b, false);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("compare two runs of the same test"), "{text}");
}
