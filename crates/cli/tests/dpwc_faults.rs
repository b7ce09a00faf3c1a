//! `persim faults` on DPWC's log (docs/design/dpwc.md, "Damage: one bit flipped"):
//! targets/dpwc/tests/damaged-entry.toml on vm/dpwc-log.toml leaves 8 entries of 4 KiB in
//! one chunk, and single bit flips in the bytes the run wrote are recovered by loading the
//! table. Skipped with a message when the VM or the module is not built, except under CI.

mod common;

use common::persim;
use persim_vm::VmConfig;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the log's first chunk starts in the PM image: /dev/pmem0 (an fsdax namespace)
/// begins 2 MiB in, and the chunk 8 KiB into it (the geometry of vm/dpwc-log.toml); and
/// the bytes each 4 KiB entry takes there: a 256-byte header, then the body.
const CHUNK: u64 = (2 << 20) + 8192;
const ENTRY: u64 = 256 + 4096;

/// The run's state without faults: the first byte of each block, block b holding b + 1.
const INTACT: &str = "12345678";

/// No flipped bit is silent, and one in an entry's body costs that entry alone: every
/// other block is replayed (its digit), the damaged one stays as the origin had it (`0`).
#[test]
fn a_bit_flipped_in_dpwcs_log_is_never_silent_and_costs_a_body_its_entry_alone() {
    let test = "a_bit_flipped_in_dpwcs_log_is_never_silent_and_costs_a_body_its_entry_alone";
    let vm = root().join("vm/dpwc-log.toml");
    let config = VmConfig::load(&vm).unwrap();
    if persim_vm::testing::vm_ready(test, &config).is_none()
        || persim_vm::testing::kmod_ready(test, &config, "dm-dpwc").is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let (vm, run) = (vm.to_str().unwrap(), run.to_str().unwrap());
    let test_file = root().join("targets/dpwc/tests/damaged-entry.toml");
    let out = persim(&[
        "run",
        "--vm",
        vm,
        "--test",
        test_file.to_str().unwrap(),
        "--out",
        run,
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let faults = dir.path().join("faults");
    let out = persim(&[
        "faults",
        run,
        "--vm",
        vm,
        "--kind",
        "bitflip",
        "--where",
        "written",
        "--count",
        "16",
        "--seed",
        "1",
        "--out",
        faults.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(faults.join("faults.json")).unwrap()).unwrap();
    let mut bodies = 0;
    for f in report["faults"].as_array().unwrap() {
        assert!(
            ["masked", "detected"].contains(&f["outcome"].as_str().unwrap()),
            "{f}"
        );
        let offset = f["fault"]["offset"].as_u64().unwrap();
        let entry = offset.wrapping_sub(CHUNK) / ENTRY;
        if offset < CHUNK || entry >= 8 || (offset - CHUNK) % ENTRY < 256 {
            continue;
        }
        bodies += 1;
        let hash = f["faulted"].as_str().unwrap();
        let state: Value = serde_json::from_slice(
            &std::fs::read(faults.join("states").join(format!("{hash}.json"))).unwrap(),
        )
        .unwrap();
        let mut expected = INTACT.to_owned();
        expected.replace_range(entry as usize..entry as usize + 1, "0");
        assert_eq!(state["dump"].as_str().unwrap().trim(), expected, "{f}");
        assert_eq!(f["outcome"], "detected", "{f}");
    }
    assert!(bodies > 0, "no fault in a body: {report:#}");
}
