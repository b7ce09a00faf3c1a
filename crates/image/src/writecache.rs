//! Where dm-writecache's cache (PM mode) lies in PM, read from its superblock (magic
//! 0x23489321, version 1, at a 4 KiB boundary after the fsdax namespace's metadata): the
//! block size, the number of blocks, and the sequence counts of the superblock and of
//! every entry in the initial image. The blocks' data starts after the entries, at a
//! block boundary. Anything else gives `None`, and nothing is pruned (docs/design/model.md,
//! "dm-writecache").

use crate::layout_bytes::{le32, le64, read};
use crate::Image;
use persim_model::WritecacheLayout;

const MAGIC: u32 = 0x2348_9321;
const VERSION: u32 = 1;
/// The superblock before the entries; an entry: origin sector, sequence count.
const SUPERBLOCK: u64 = 64;
const ENTRY: u64 = 16;

/// The dm-writecache cache in `image`'s first `pm_size` bytes.
pub fn writecache_layout(image: &Image, pm_size: u64) -> Option<WritecacheLayout> {
    // an fsdax namespace reserves about 1/64 of its size for page structures first
    let scan = (pm_size / 16 + (4 << 20)).min(pm_size.saturating_sub(SUPERBLOCK));
    let start = (0..scan).step_by(4096).find(|&at| {
        let head = read(image, at, 8);
        le32(&head, 0) == MAGIC && le32(&head, 4) == VERSION
    })?;
    let sb = read(image, start, SUPERBLOCK as usize);
    let block_size = u64::from(le32(&sb, 8));
    let blocks = le64(&sb, 16);
    let sane = block_size.is_power_of_two()
        && (512..=65536).contains(&block_size)
        && blocks > 0
        && blocks <= pm_size / block_size;
    if !sane {
        return None;
    }
    let data = (SUPERBLOCK + blocks * ENTRY).next_multiple_of(block_size);
    if start + data + blocks * block_size > pm_size {
        return None;
    }
    let table = read(image, start + SUPERBLOCK, (blocks * ENTRY) as usize);
    Some(WritecacheLayout {
        start,
        block_size,
        data,
        seq: le64(&sb, 24),
        entries: table
            .chunks_exact(ENTRY as usize)
            .map(|entry| le64(entry, 8))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A superblock of 4 KiB blocks, 8 of them, count 5, behind 1 MiB of namespace
    /// metadata; block 2's entry holds count 4, the others are free.
    fn image(magic: u32) -> Image {
        let mut image = Image::zeroed(2 << 20);
        let mut sb = Vec::new();
        for word in [magic, VERSION, 4096, 0] {
            sb.extend(word.to_le_bytes());
        }
        sb.extend(8u64.to_le_bytes());
        sb.extend(5u64.to_le_bytes());
        image.write(1 << 20, &sb);
        for block in 0..8u64 {
            let count: u64 = if block == 2 { 4 } else { u64::MAX };
            image.write(
                (1 << 20) + SUPERBLOCK + block * ENTRY + 8,
                &count.to_le_bytes(),
            );
        }
        image
    }

    #[test]
    fn the_superblock_gives_the_blocks_and_the_counts() {
        let layout = writecache_layout(&image(MAGIC), 2 << 20).expect("a cache");
        assert_eq!((layout.start, layout.block_size), (1 << 20, 4096));
        assert_eq!(
            layout.data, 4096,
            "the entries fit before the first block boundary"
        );
        assert_eq!(layout.seq, 5);
        let mut counts = vec![u64::MAX; 8];
        counts[2] = 4;
        assert_eq!(layout.entries, counts);
        assert!(writecache_layout(&image(MAGIC + 1), 2 << 20).is_none());
        // the blocks past the end of PM
        assert!(writecache_layout(&image(MAGIC), (1 << 20) + 0x4000).is_none());
    }
}
