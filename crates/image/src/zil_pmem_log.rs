//! Where ZIL-PMEM's region (OpenZFS with targets/zil-pmem/openzfs, format 2) lies in PM,
//! read from its superblock (`ZILPMEM\0`, at a 4 KiB boundary of the log vdev, after the
//! fsdax namespace's metadata and the vdev's labels), and where each chunk's walk stops in
//! the initial image. Any other version, a wrong checksum or geometry the kernel would
//! refuse gives `None`, and nothing is pruned (docs/design/model.md, "ZIL-PMEM log").
//! The engine's own format (1) is left out: its region is a file, whose extents need not
//! lie in PM in order.

use crate::layout_bytes::{le32, le64, read};
use crate::Image;
use persim_model::{zil_pmem_entry_fits, ZilPmemLayout, ZIL_PMEM_SLOT, ZIL_PMEM_SUPERBLOCK_SPACE};

const MAGIC: &[u8; 8] = b"ZILPMEM\0";
const VERSION: u32 = 2;
/// Bytes of the superblock's fields its CRC32C covers; the checksum follows.
const CHECKED: usize = 32;

/// The ZIL-PMEM region in `image`'s first `pm_size` bytes.
pub fn zil_pmem_layout(image: &Image, pm_size: u64) -> Option<ZilPmemLayout> {
    let start = (0..pm_size.saturating_sub(ZIL_PMEM_SUPERBLOCK_SPACE))
        .step_by(ZIL_PMEM_SUPERBLOCK_SPACE as usize)
        .find(|&at| read(image, at, 8) == MAGIC)?;
    let sb = read(image, start, CHECKED + 4);
    let (chunk_size, chunks) = (le64(&sb, 16), le64(&sb, 24));
    let end = chunks
        .checked_mul(chunk_size)
        .and_then(|len| len.checked_add(start + ZIL_PMEM_SUPERBLOCK_SPACE));
    let sane = le32(&sb, 8) == VERSION
        && u64::from(le32(&sb, 12)) == ZIL_PMEM_SLOT
        && crc32c::crc32c(&sb[..CHECKED]) == le32(&sb, CHECKED)
        && chunk_size.is_multiple_of(ZIL_PMEM_SLOT)
        && chunk_size >= 2 * ZIL_PMEM_SLOT
        && chunks >= 1
        && end.is_some_and(|end| end <= pm_size);
    if !sane {
        return None;
    }
    let chunk = |c: u64| start + ZIL_PMEM_SUPERBLOCK_SPACE + c * chunk_size;
    let ends = (0..chunks)
        .map(|c| walk_end(image, chunk(c), chunk_size))
        .collect();
    Some(ZilPmemLayout {
        start,
        chunk_size,
        ends,
    })
}

/// Where a walk of the chunk at `base` stops if it follows every length that fits: at or
/// past the kernel's, which also checks each header's checksum and log.
fn walk_end(image: &Image, base: u64, chunk_size: u64) -> u64 {
    let mut slot = 0;
    while slot + ZIL_PMEM_SLOT <= chunk_size {
        let len = le64(&read(image, base + slot + 48, 8), 0);
        if !zil_pmem_entry_fits(slot, len, chunk_size) {
            break;
        }
        slot += len;
    }
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    const END_WORD: u64 = u64::from_le_bytes(*b"ZILPMEND");

    /// A superblock (`version`, three chunks of 4 KiB) at 2 MiB + 4 MiB, chunk 1 holding
    /// entries of 512 and 768 bytes then the end mark, the others the end mark first.
    fn image(version: u32) -> Image {
        let mut image = Image::zeroed(8 << 20);
        let start = 6 << 20;
        let mut sb = Vec::from(*MAGIC);
        sb.extend(version.to_le_bytes());
        sb.extend((ZIL_PMEM_SLOT as u32).to_le_bytes());
        sb.extend(4096u64.to_le_bytes());
        sb.extend(3u64.to_le_bytes());
        let crc = crc32c::crc32c(&sb);
        sb.extend(crc.to_le_bytes());
        image.write(start, &sb);
        let chunk = |c: u64| start + 4096 + c * 4096;
        for (c, slot) in [(0, 0), (1, 1280), (2, 0)] {
            image.write(chunk(c) + slot + 48, &END_WORD.to_le_bytes());
        }
        image.write(chunk(1) + 48, &512u64.to_le_bytes());
        image.write(chunk(1) + 512 + 48, &768u64.to_le_bytes());
        image
    }

    #[test]
    fn the_region_and_where_each_chunk_walk_stops_are_read() {
        let layout = zil_pmem_layout(&image(VERSION), 8 << 20).unwrap();
        assert_eq!(layout.start, 6 << 20);
        assert_eq!(layout.chunk_size, 4096);
        assert_eq!(layout.ends, [0, 1280, 0]);
    }

    #[test]
    fn another_version_or_a_region_past_pm_gives_none() {
        assert_eq!(zil_pmem_layout(&image(1), 8 << 20), None);
        assert_eq!(zil_pmem_layout(&image(VERSION), (6 << 20) + 8192), None);
    }
}
