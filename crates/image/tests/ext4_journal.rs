//! The jbd2 journal of a real ext4 file system (Debian's mkfs.ext4, as the VM
//! configurations make it), found behind 2 MiB of fsdax metadata: every journal block maps
//! where debugfs says the journal inode's blocks are, and what mount reads before replay
//! (superblock, group descriptors, journal inode) where dumpe2fs and debugfs put it.

mod common;

use common::tool;
use persim_image::{journal_layout, Image};
use std::path::Path;
use std::process::Command;

/// The physical block debugfs maps logical block `logical` of inode 8 to.
fn bmap(debugfs: &str, fs: &Path, logical: u64) -> u64 {
    let out = Command::new(debugfs)
        .args(["-R", &format!("bmap <8> {logical}")])
        .arg(fs)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn the_journal_of_a_real_ext4_is_found_where_debugfs_puts_it() {
    let (mkfs, debugfs) = (tool("mkfs.ext4", "e2fsprogs"), tool("debugfs", "e2fsprogs"));
    let tmp = tempfile::tempdir().unwrap();
    let fs = tmp.path().join("fs");
    std::fs::write(&fs, vec![0u8; 64 << 20]).unwrap();
    let made = Command::new(mkfs)
        .args(["-q", "-F", "-b", "4096", "-E", "lazy_journal_init=0"])
        .arg(&fs)
        .status()
        .unwrap();
    assert!(made.success());
    let offset = 2u64 << 20;
    let mut bytes = vec![0u8; offset as usize];
    bytes.extend(std::fs::read(&fs).unwrap());
    let pm = tmp.path().join("pm");
    std::fs::write(&pm, &bytes).unwrap();
    let len = bytes.len() as u64;
    let image = Image::from_file(&pm, len).unwrap();

    let layout = journal_layout(&image, len).expect("a journal");
    assert_eq!(layout.block_size, 4096);
    assert_eq!(layout.fs_start, Some(offset));
    // the kernel switches the journal's checksums (v3, 16-byte tags) on at the first mount
    assert_eq!(layout.tag_bytes, Some(8));
    assert_eq!(
        layout.revoke_bytes, 4,
        "no 64-bit block numbers in the journal yet"
    );
    assert_eq!(layout.tail_block, 0, "an empty journal");
    let blocks: u64 = layout.extents.iter().map(|e| e.blocks).sum();
    assert_eq!(blocks, 1024, "a 4 MiB journal on a 64 MiB file system");
    for extent in &layout.extents {
        for logical in [extent.logical, extent.logical + extent.blocks - 1] {
            let start = extent.start + (logical - extent.logical) * 4096;
            assert_eq!(
                start,
                offset + bmap(&debugfs, &fs, logical) * 4096,
                "block {logical}"
            );
        }
    }
    // dumpe2fs: "Primary superblock at 0, Group descriptors at 1-1"; debugfs `imap <8>`:
    // "located at block B, offset 0xO", 256-byte inodes
    let dumpe2fs = Command::new(tool("dumpe2fs", "e2fsprogs"))
        .arg(&fs)
        .output()
        .unwrap();
    let dumped = String::from_utf8_lossy(&dumpe2fs.stdout);
    assert!(dumped.contains("Primary superblock at 0, Group descriptors at 1-1"));
    let imap = Command::new(&debugfs)
        .args(["-R", "imap <8>"])
        .arg(&fs)
        .output()
        .unwrap();
    let imap = String::from_utf8_lossy(&imap.stdout);
    let (block, at) = imap
        .split_once("located at block ")
        .and_then(|(_, rest)| rest.trim().split_once(", offset 0x"))
        .unwrap();
    let inode =
        offset + block.parse::<u64>().unwrap() * 4096 + u64::from_str_radix(at, 16).unwrap();
    assert_eq!(
        layout.read_before_replay,
        [offset..offset + 2 * 4096, inode..inode + 256]
    );
    // no file system: no journal
    let zeros = Image::zeroed(8 << 20);
    assert!(journal_layout(&zeros, 8 << 20).is_none());
}
