//! `zil-pmem-dump` end to end on images the engine writes (the kernel's own:
//! crates/cli/tests/run_vm.rs).

use assert_cmd::Command;
use persim_ringbuf::{Eadr, HeapRegion};
use persim_zil_pmem::openzfs::engine_region_to_kernel;
use persim_zil_pmem::{LogHeader, ZilPmem};

/// A 4 MiB gap (the vdev's front labels), then a region (the kernel's format) with two entries of dataset 54
/// (txgs 11, 12), the second one's body damaged.
fn image(dir: &std::path::Path) -> std::path::PathBuf {
    let mut log = ZilPmem::format(HeapRegion::new(4096 + 4 * 4096), Eadr, 4096, 1).unwrap();
    let claim = log.claim(&LogHeader::new(7, 8), 1).unwrap();
    log.replay(&claim, |_, _| Ok::<(), ()>(())).unwrap();
    let mut body = vec![1; 64];
    body[..8].copy_from_slice(&9u64.to_le_bytes()); // TX_WRITE
    log.append(54, 11, &body, true).unwrap();
    log.append(54, 12, &body, true).unwrap();
    let mut region = log.into_region().as_slice().to_vec();
    engine_region_to_kernel(&mut region);
    let mut bytes = vec![0; 4 << 20];
    bytes.extend_from_slice(&region);
    bytes[(4 << 20) + 4096 + 512 + 256 + 10] ^= 1;
    let path = dir.join("pm.img");
    std::fs::write(&path, bytes).unwrap();
    path
}

fn dump() -> Command {
    Command::cargo_bin("zil-pmem-dump").unwrap()
}

#[test]
fn text_lists_entries_and_the_replay_a_synced_txg_gives() {
    let dir = tempfile::tempdir().unwrap();
    let out = dump()
        .arg(image(dir.path()))
        .args(["--synced-txg", "10"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("1.1 objset 54 txg 11 WRITE"), "{text}");
    assert!(text.contains("2.1 objset 54 txg 12 damaged body"), "{text}");
    assert!(
        text.contains("objset 54: 1 entries replayed, 1 lost; the log is kept until abandoned"),
        "{text}"
    );
    assert!(text.contains("its checksum does not match"), "{text}");
}

#[test]
fn json_carries_the_same_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let out = dump()
        .arg(image(dir.path()))
        .args(["--synced-txg", "11", "--json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["region_offset"], 4 << 20);
    assert_eq!(json["entries"].as_array().unwrap().len(), 2);
    let replay = &json["replay"][0];
    assert_eq!(replay["claim_txg"], 12);
    assert_eq!(replay["replayed"].as_array().unwrap().len(), 0);
    assert_eq!(replay["lost"][0]["reason"], "its checksum does not match");
}

#[test]
fn bad_input_exits_2_and_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("zeros.img");
    std::fs::write(&empty, vec![0; 1 << 20]).unwrap();
    let out = dump().arg(&empty).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ZIL-PMEM superblock"));
    let out = dump()
        .arg(image(dir.path()))
        .arg("--pool-image")
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--synced-txg"));
    let out = dump().arg(dir.path().join("missing")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
