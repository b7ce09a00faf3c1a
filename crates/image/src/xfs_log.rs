//! Where an XFS file system in PM keeps its internal log, read from its on-media format:
//! the primary superblock (at a 4 KiB boundary, after the fsdax namespace's metadata),
//! `sb_logstart` (a file-system block number: allocation group and block in it) and
//! `sb_logblocks`. Only version 5 (CRCs on log records) is taken; anything else gives
//! `None`, and nothing is pruned (docs/design/model.md, "XFS log").

use crate::layout_bytes::{be16, be32, be64, read};
use crate::Image;
use persim_model::XfsLogLayout;

const XFS_MAGIC: u32 = 0x5846_5342;
const VERSION_MASK: u16 = 0xf;
const VERSION_5: u16 = 5;

/// The internal log of the first XFS file system in `image`'s first `pm_size` bytes.
pub fn xfs_log_layout(image: &Image, pm_size: u64) -> Option<XfsLogLayout> {
    // an fsdax namespace reserves about 1/64 of its size for page structures first
    let scan = (pm_size / 16 + (4 << 20)).min(pm_size.saturating_sub(512));
    let fs_start = (0..scan)
        .step_by(4096)
        .find(|&at| be32(&read(image, at, 4), 0) == XFS_MAGIC)?;
    let sb = read(image, fs_start, 0x80);
    let block_size = u64::from(be32(&sb, 0x4));
    let log_start = be64(&sb, 0x30);
    let ag_blocks = u64::from(be32(&sb, 0x54));
    let log_blocks = u64::from(be32(&sb, 0x60));
    let version = be16(&sb, 0x64);
    let ag_block_log = u32::from(sb[0x7c]);
    let sane = block_size.is_power_of_two()
        && (512..=65536).contains(&block_size)
        && ag_block_log < 32
        && log_start != 0
        && log_blocks != 0;
    if version & VERSION_MASK != VERSION_5 || !sane {
        return None;
    }
    // sb_logstart is (allocation group << agblklog) | block in that group
    let ag = log_start >> ag_block_log;
    let block = log_start & ((1 << ag_block_log) - 1);
    let start = fs_start + (ag * ag_blocks + block) * block_size;
    let len = log_blocks * block_size;
    (start + len <= pm_size).then_some(XfsLogLayout {
        fs_start,
        start,
        len,
    })
}
