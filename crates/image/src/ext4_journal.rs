//! Where an ext4 file system in PM keeps its jbd2 journal, read from its on-media format:
//! the primary superblock (found at a 4 KiB boundary: an fsdax namespace starts its data
//! after its own metadata), the journal inode's extents, and the journal superblock. Also
//! an external journal device (`mkfs.ext4 -O journal_dev`) whose file system is elsewhere.
//! Anything unexpected gives `None`: then nothing is pruned (docs/design/model.md,
//! "Journals").

use crate::layout_bytes::{be32, le16, le32, read};
use crate::Image;
use persim_model::{JournalExtent, JournalLayout};
use std::ops::Range;

const EXT4_MAGIC: u16 = 0xef53;
const JBD2_MAGIC: u32 = 0xc03b_3998;
const HAS_JOURNAL: u32 = 0x4;
const JOURNAL_DEV: u32 = 0x8;
const INCOMPAT_64BIT: u32 = 0x80;
const EXTENT_MAGIC: u16 = 0xf30a;
/// jbd2 incompatible features.
const JBD2_64BIT: u32 = 0x2;
const JBD2_CSUM_V2: u32 = 0x8;
const JBD2_CSUM_V3: u32 = 0x10;
const JBD2_FAST_COMMIT: u32 = 0x20;

/// The journal of the first ext4 file system in `image`'s first `pm_size` bytes.
pub fn journal_layout(image: &Image, pm_size: u64) -> Option<JournalLayout> {
    // an fsdax namespace reserves about 1/64 of its size for page structures first
    let scan = (pm_size / 16 + (4 << 20)).min(pm_size.saturating_sub(2048));
    let fs_start = (0..scan)
        .step_by(4096)
        .find(|&at| primary_superblock(image, at))?;
    let sb = read(image, fs_start + 1024, 1024);
    let block_size = 1024u64 << le32(&sb, 0x18).min(6);
    let incompat = le32(&sb, 0x60);
    let mut read_before_replay = Vec::new();
    let (extents, fs) = if incompat & JOURNAL_DEV != 0 {
        // the journal follows the block that holds this superblock, to the device's end
        let start = fs_start + (1024 / block_size + 1) * block_size;
        let blocks = (pm_size - start) / block_size;
        let whole = JournalExtent {
            logical: 0,
            start,
            blocks,
        };
        (vec![whole], None)
    } else {
        if le32(&sb, 0x5c) & HAS_JOURNAL == 0 {
            return None;
        }
        let inode = journal_inode(image, fs_start, &sb, block_size)?;
        let runs = journal_extents(image, fs_start, block_size, &inode)?;
        read_before_replay = vec![
            fs_start..fs_start + superblock_and_descriptors(&sb, block_size)? * block_size,
            inode.clone(),
        ];
        let extents = runs
            .into_iter()
            .map(|(logical, physical, blocks)| JournalExtent {
                logical,
                start: fs_start + physical * block_size,
                blocks,
            })
            .collect();
        (extents, Some(fs_start))
    };
    let start = extents.iter().find(|e| e.logical == 0)?.start;
    let jsb = read(image, start, 1024);
    if be32(&jsb, 0) != JBD2_MAGIC || u64::from(be32(&jsb, 0xc)) != block_size {
        return None;
    }
    let features = be32(&jsb, 0x28);
    if features & JBD2_FAST_COMMIT != 0 {
        return None;
    }
    let tag_bytes = match (features & JBD2_CSUM_V3 != 0, features & JBD2_CSUM_V2 != 0) {
        (true, _) => Some(16),
        (false, true) => None,
        (false, false) if features & JBD2_64BIT != 0 => Some(12),
        (false, false) => Some(8),
    };
    let inside = extents
        .iter()
        .all(|e| e.start + e.blocks * block_size <= pm_size);
    inside.then_some(JournalLayout {
        extents,
        block_size,
        fs_start: fs,
        tag_bytes,
        revoke_bytes: match features & JBD2_64BIT {
            0 => 4,
            _ => 8,
        },
        tail_sequence: be32(&jsb, 0x18),
        tail_block: be32(&jsb, 0x1c),
        read_before_replay,
    })
}

fn primary_superblock(image: &Image, at: u64) -> bool {
    let sb = read(image, at + 1024, 0x60);
    le16(&sb, 0x38) == EXT4_MAGIC && le32(&sb, 0x18) <= 6 && le16(&sb, 0x5a) == 0
}

/// The file system's blocks up to the end of the primary group descriptors: what mount
/// reads and checks (the superblock's and each group's checksum) before journal replay.
fn superblock_and_descriptors(sb: &[u8], block_size: u64) -> Option<u64> {
    let first_data_block = u64::from(le32(sb, 0x14));
    let blocks_per_group = u64::from(le32(sb, 0x20));
    let wide = le32(sb, 0x60) & INCOMPAT_64BIT != 0;
    let mut blocks = u64::from(le32(sb, 0x4));
    if wide {
        blocks |= u64::from(le32(sb, 0x150)) << 32;
    }
    let groups = blocks
        .checked_sub(first_data_block)?
        .div_ceil(blocks_per_group.max(1));
    let descriptors = (groups * desc_size(sb)).div_ceil(block_size);
    Some(first_data_block + 1 + descriptors)
}

fn desc_size(sb: &[u8]) -> u64 {
    match le32(sb, 0x60) & INCOMPAT_64BIT != 0 {
        true => u64::from(le16(sb, 0xfe)),
        false => 32,
    }
}

/// The journal inode's bytes in PM.
fn journal_inode(image: &Image, fs_start: u64, sb: &[u8], block_size: u64) -> Option<Range<u64>> {
    let inodes_per_group = u64::from(le32(sb, 0x28));
    let inode_size = u64::from(le16(sb, 0x58));
    let inode = u64::from(le32(sb, 0xe0));
    if inodes_per_group == 0 || inode == 0 {
        return None;
    }
    let wide = le32(sb, 0x60) & INCOMPAT_64BIT != 0;
    let desc_size = desc_size(sb);
    let group = (inode - 1) / inodes_per_group;
    let gdt = fs_start + (u64::from(le32(sb, 0x14)) + 1) * block_size;
    let desc = read(image, gdt + group * desc_size, desc_size as usize);
    let mut table = u64::from(le32(&desc, 0x8));
    if wide && desc_size >= 64 {
        table |= u64::from(le32(&desc, 0x28)) << 32;
    }
    let at = fs_start + table * block_size + (inode - 1) % inodes_per_group * inode_size;
    Some(at..at + inode_size)
}

/// The journal inode's extents: (logical block, physical block, blocks).
fn journal_extents(
    image: &Image,
    fs_start: u64,
    block_size: u64,
    inode: &Range<u64>,
) -> Option<Vec<(u64, u64, u64)>> {
    let node = read(image, inode.start + 0x28, 60);
    let mut runs = Vec::new();
    extents(image, fs_start, block_size, &node, 0, &mut runs)?;
    (!runs.is_empty()).then_some(runs)
}

/// Collects (logical block, physical block, blocks) of the extents of a tree node and its
/// children.
fn extents(
    image: &Image,
    fs_start: u64,
    block_size: u64,
    node: &[u8],
    depth_seen: u16,
    runs: &mut Vec<(u64, u64, u64)>,
) -> Option<()> {
    if le16(node, 0) != EXTENT_MAGIC || depth_seen > 5 {
        return None;
    }
    let entries = usize::from(le16(node, 2));
    let depth = le16(node, 6);
    for i in 0..entries {
        let e = 12 + 12 * i;
        if e + 12 > node.len() {
            return None;
        }
        if depth == 0 {
            // a length above 32768 marks an unwritten extent of that length minus 32768
            let raw = u64::from(le16(node, e + 4));
            let blocks = if raw > 32768 { raw - 32768 } else { raw };
            let physical = u64::from(le16(node, e + 6)) << 32 | u64::from(le32(node, e + 8));
            runs.push((u64::from(le32(node, e)), physical, blocks));
        } else {
            let leaf = u64::from(le16(node, e + 8)) << 32 | u64::from(le32(node, e + 4));
            let child = read(image, fs_start + leaf * block_size, block_size as usize);
            extents(image, fs_start, block_size, &child, depth_seen + 1, runs)?;
        }
    }
    Some(())
}
