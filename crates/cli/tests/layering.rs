//! The crates are layers (docs/design/architecture.md): a crate may use only crates below it.
//! Reads `cargo metadata` and fails when a workspace crate depends on one at its level or
//! above, or when a crate is missing from the table.

use serde_json::Value;
use std::process::Command;

/// Each workspace package and what it may depend on among the workspace's packages.
const ALLOWED: &[(&str, &[&str])] = &[
    ("persim-abi", &[]),
    ("persim-trace", &[]),
    ("persim-state", &["persim-abi"]),
    ("persim-model", &["persim-trace"]),
    ("persim-image", &["persim-model", "persim-trace"]),
    ("persim-vm", &["persim-abi", "persim-trace", "persim-state"]),
    // Measurements of CPU time, energy and fio: no VM (the guest's series is the tester's).
    ("persim-efficiency", &["persim-trace"]),
    // Trace analysis reads traces through the model: no states, no VM.
    ("persim-inspect", &["persim-model", "persim-trace"]),
    // Judging states; it must not compile the VM driver that produces them.
    (
        "persim-analyze",
        &[
            "persim-inspect",
            "persim-state",
            "persim-model",
            "persim-trace",
        ],
    ),
    (
        "persim-tester",
        &[
            "persim-analyze",
            "persim-inspect",
            "persim-efficiency",
            "persim-vm",
            "persim-image",
            "persim-model",
            "persim-trace",
            "persim-abi",
            "persim-state",
        ],
    ),
    (
        "persim",
        &[
            "persim-tester",
            "persim-analyze",
            "persim-inspect",
            "persim-efficiency",
            "persim-vm",
            "persim-image",
            "persim-model",
            "persim-trace",
        ],
    ),
    // The plugin runs inside QEMU: the trace codec and the shared ABI only.
    ("persim-plugin", &["persim-trace", "persim-abi"]),
    // The guest's static tools.
    ("persim-guest", &["persim-abi"]),
    // Subjects under test (targets/): no part of the tool; their tests use its model and
    // trace analysis.
    (
        "persim-ringbuf",
        &[
            "persim-trace",
            "persim-model",
            "persim-image",
            "persim-inspect",
        ],
    ),
    (
        "persim-subjects",
        &[
            "persim-guest",
            "persim-ringbuf",
            "persim-zil-pmem",
            "persim-pangolin",
        ],
    ),
    // The in-process crash-check harness of the ring buffer's and ZIL-PMEM's tests.
    (
        "persim-crash-check",
        &["persim-ringbuf", "persim-trace", "persim-model"],
    ),
    // ZIL-PMEM's log engine takes the ring buffer's PM accesses; its tests replay traces.
    (
        "persim-zil-pmem",
        &["persim-ringbuf", "persim-trace", "persim-model"],
    ),
    // Pangolin's fault-tolerant objects take the ring buffer's PM accesses; its tests
    // replay traces. Its C ABI wraps it.
    (
        "persim-pangolin",
        &[
            "persim-ringbuf",
            "persim-crash-check",
            "persim-trace",
            "persim-model",
        ],
    ),
    (
        "persim-pangolin-capi",
        &["persim-pangolin", "persim-ringbuf"],
    ),
    // ZIL-PMEM's reader of an OpenZFS pool's PM log is the engine's.
    ("zil-pmem-dump", &["persim-zil-pmem"]),
    // The reader of dm-dpwc's PM format (targets/dpwc/reader) stands alone.
    ("dpwc-reader", &[]),
];

#[test]
fn no_crate_depends_on_one_above_it() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    let members: Vec<&str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let mut wrong = Vec::new();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let Some((_, allowed)) = ALLOWED.iter().find(|(n, _)| *n == name) else {
            wrong.push(format!("{name} is not in the layer table of this test"));
            continue;
        };
        for dep in package["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            let normal = dep["kind"].is_null();
            if normal && members.contains(&dep_name) && !allowed.contains(&dep_name) {
                wrong.push(format!("{name} must not depend on {dep_name}"));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}
