//! `dpwc-dump` on image files: text, JSON, and the refusal of files that are not a cache.

use assert_cmd::Command;
use dpwc_reader::{ImageBuilder, Op, Superblock, HEADER_LEN};
use serde_json::Value;
use std::path::Path;

/// One live generation: a write and a discard in chunk 0, a write with a damaged data byte
/// in chunk 1; one free generation.
fn image(dir: &Path) -> std::path::PathBuf {
    let mut b = ImageBuilder::format(Superblock::new(8192, 2, 2, 1024));
    b.open_generation(1, 4);
    b.append(
        1,
        0,
        1,
        Op::Write {
            sector: 8,
            data: &[0xab; 512],
        },
    )
    .unwrap();
    b.append(
        1,
        0,
        3,
        Op::Discard {
            sector: 16,
            len: 4096,
        },
    )
    .unwrap();
    b.append(
        1,
        1,
        2,
        Op::Write {
            sector: 9,
            data: &[1; 512],
        },
    )
    .unwrap();
    let at = b.superblock().chunk_offset(1, 1) as usize + HEADER_LEN;
    b.image_mut()[at] ^= 1;
    let path = dir.join("pm.img");
    std::fs::write(&path, b.into_image()).unwrap();
    path
}

fn dump() -> Command {
    Command::cargo_bin("dpwc-dump").unwrap()
}

#[test]
fn text_names_entries_the_corrupt_one_and_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let out = dump()
        .arg(image(dir.path()))
        .arg("--data")
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for line in [
        "generation 0: free, not replayed (used counters 0 0)",
        "generation 1: id 4",
        "entry 1 at offset 0: write sector 8 len 512 flags 0x0",
        "entry 3 at offset 768: discard sector 16 len 4096 flags 0x1",
        "corrupt at offset 0 (entry 2): data checksum mismatch",
        "replay: 2 entries in (generation id, entry id) order, 1 writes and 1 discards; 1 sectors written, 8 discarded",
        "sectors 8..9 written",
        "sectors 16..24 discarded",
        &format!("000000  {}", "ab".repeat(32)),
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
}

#[test]
fn json_has_the_table_entries_corruption_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let out = dump()
        .arg(image(dir.path()))
        .args(["--json", "--data"])
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["superblock"]["chunk_size"], 8192);
    assert_eq!(json["generations"][0]["gen_id"], 0);
    let chunks = &json["generations"][1]["chunks"];
    assert_eq!(chunks[0]["entries"][0]["sector"], 8);
    assert_eq!(chunks[0]["entries"][0]["data"], "ab".repeat(512));
    assert_eq!(chunks[0]["entries"][1]["flags"], 1);
    assert_eq!(chunks[1]["corrupt"][0]["reason"]["kind"], "data_crc");
    assert_eq!(chunks[1]["corrupt"][0]["header"]["id"], 2);
    assert_eq!(json["replay"]["order"], serde_json::json!([[4, 1], [4, 3]]));
    assert_eq!(json["replay"]["discarded_sectors"], 8);
}

#[test]
fn a_file_that_is_not_a_cache_exits_2_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeros.img");
    std::fs::write(&path, vec![0; 1 << 16]).unwrap();
    let out = dump().arg(&path).assert().code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("not a DPWC cache"), "{stderr}");
    dump().arg(dir.path().join("missing.img")).assert().code(2);
}
