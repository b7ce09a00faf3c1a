//! The internal log of a real XFS file system (Debian's mkfs.xfs, as the VM configuration
//! makes it, with three allocation groups so that the log's block number is not a plain
//! offset), found behind 2 MiB of fsdax metadata where xfs_db puts it; a version 4 file
//! system (no CRCs on log records) has none.

mod common;

use common::tool;
use persim_image::{xfs_log_layout, Image};
use std::path::Path;
use std::process::Command;

fn mkfs(mkfs: &str, fs: &Path, meta: &str) {
    std::fs::write(fs, vec![0u8; 64 << 20]).unwrap();
    // the variables let mkfs.xfs make a file system under 300 MiB
    let made = Command::new(mkfs)
        .envs([("TEST_DIR", "1"), ("TEST_DEV", "1"), ("QA_CHECK_FS", "1")])
        .args(["-q", "-f", "-m", meta, "-d", "agcount=3"])
        .arg(fs)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
}

/// A superblock field, or a command's number, as xfs_db prints it ("name = value" or
/// "0x... (decimal)").
fn xfs_db(xfs_db: &str, fs: &Path, commands: &[&str]) -> u64 {
    let mut cmd = Command::new(xfs_db);
    cmd.arg("-r");
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = cmd.arg(fs).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    let value = last
        .rsplit(['=', '('])
        .next()
        .unwrap()
        .trim_end_matches(')');
    value.trim().parse().unwrap()
}

fn in_pm(fs: &Path, offset: u64) -> (Image, u64) {
    let mut bytes = vec![0u8; offset as usize];
    bytes.extend(std::fs::read(fs).unwrap());
    let pm = fs.with_extension("pm");
    std::fs::write(&pm, &bytes).unwrap();
    let len = bytes.len() as u64;
    (Image::from_file(&pm, len).unwrap(), len)
}

#[test]
fn the_log_of_a_real_xfs_is_found_where_xfs_db_puts_it() {
    let (mkfs_xfs, db) = (tool("mkfs.xfs", "xfsprogs"), tool("xfs_db", "xfsprogs"));
    let tmp = tempfile::tempdir().unwrap();
    let fs = tmp.path().join("fs");
    mkfs(&mkfs_xfs, &fs, "reflink=0");
    let log_start = xfs_db(&db, &fs, &["sb 0", "p logstart"]);
    let daddr = xfs_db(&db, &fs, &[&format!("convert fsb {log_start} daddr")]);
    let log_blocks = xfs_db(&db, &fs, &["sb 0", "p logblocks"]);
    assert!(
        daddr * 512 != log_start * 4096,
        "the log lies past allocation group 0's end"
    );
    let offset = 2u64 << 20;
    let (image, len) = in_pm(&fs, offset);
    let layout = xfs_log_layout(&image, len).expect("a log");
    assert_eq!(layout.fs_start, offset);
    assert_eq!(layout.start, offset + daddr * 512);
    assert_eq!(layout.len, log_blocks * 4096);
    // an empty log's first record is mkfs.xfs's unmount record
    let mut magic = [0u8; 4];
    image.read(layout.start, &mut magic);
    assert_eq!(magic, [0xfe, 0xed, 0xba, 0xbe]);

    // version 4: no CRC, no mechanism
    let v4 = tmp.path().join("v4");
    mkfs(&mkfs_xfs, &v4, "crc=0");
    let (image, len) = in_pm(&v4, offset);
    assert!(xfs_log_layout(&image, len).is_none());
    // no file system: no log
    assert!(xfs_log_layout(&Image::zeroed(8 << 20), 8 << 20).is_none());
}
