//! Where a DPWC log (docs/design/dpwc.md, layout version 4) lies in PM, read from its
//! superblock (`DPWCSUP1`, at a 4 KiB boundary after the fsdax namespace's metadata), and
//! each chunk's `used` counter in the initial image. Any other version, or geometry the
//! module would refuse, gives `None`, and nothing is pruned (docs/design/model.md, "DPWC
//! log").

use crate::layout_bytes::{le32, le64, read};
use crate::Image;
use persim_model::{DpwcLayout, LINE};

const MAGIC: &[u8; 8] = b"DPWCSUP1";
const VERSION: u32 = 4;
const TABLE: u64 = 4096;

/// The DPWC log in `image`'s first `pm_size` bytes.
pub fn dpwc_layout(image: &Image, pm_size: u64) -> Option<DpwcLayout> {
    // an fsdax namespace reserves about 1/64 of its size for page structures first
    let scan = (pm_size / 16 + (4 << 20)).min(pm_size.saturating_sub(64));
    let start = (0..scan)
        .step_by(4096)
        .find(|&at| read(image, at, 8) == MAGIC)?;
    let sb = read(image, start, 64);
    let chunk_size = u64::from(le32(&sb, 12));
    let chunks_per_gen = u64::from(le32(&sb, 16));
    let generations = u64::from(le32(&sb, 20));
    let (table, data) = (le64(&sb, 32), le64(&sb, 40));
    let table_end = TABLE + generations * (1 + chunks_per_gen) * LINE;
    let data_end = generations
        .checked_mul(chunks_per_gen)
        .and_then(|chunks| chunks.checked_mul(chunk_size))
        .and_then(|len| len.checked_add(start + data));
    let sane = le32(&sb, 8) == VERSION
        && chunk_size.is_multiple_of(4096)
        && chunk_size >= 8192
        && u32::try_from(chunk_size).is_ok()
        && chunks_per_gen >= 1
        && generations >= 2
        && table == TABLE
        && data.is_multiple_of(4096)
        && data >= table_end
        && data_end.is_some_and(|end| end <= pm_size);
    if !sane {
        return None;
    }
    let mut layout = DpwcLayout {
        start,
        chunk_size,
        chunks_per_gen,
        generations,
        table,
        data,
        used: Vec::new(),
    };
    // a counter is its u32 then its CRC; whatever its CRC, recovery reads no further
    layout.used = (0..generations)
        .flat_map(|g| (0..chunks_per_gen).map(move |c| (g, c)))
        .map(|(g, c)| {
            let at = start + TABLE + (g * (1 + chunks_per_gen) + 1 + c) * LINE;
            u64::from(le32(&read(image, at, 4), 0)).min(chunk_size)
        })
        .collect();
    Some(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A superblock (version, 8 KiB chunks, 2 per generation, 2 generations, the table
    /// at 4 KiB, data at 8 KiB) behind 1 MiB of namespace metadata, chunk 3's `used` 0x300.
    fn image(version: u32) -> Image {
        let mut image = Image::zeroed(2 << 20);
        let mut sb = Vec::from(*MAGIC);
        for word in [version, 0x2000, 2, 2] {
            sb.extend(word.to_le_bytes());
        }
        for word in [1u64 << 20, 4096, 8192] {
            sb.extend(word.to_le_bytes());
        }
        image.write(1 << 20, &sb);
        image.write((1 << 20) + 4096 + (3 + 2) * 64, &0x300u32.to_le_bytes());
        image
    }

    #[test]
    fn the_superblock_gives_the_geometry_and_the_counters() {
        let layout = dpwc_layout(&image(4), 2 << 20).expect("a log");
        assert_eq!(layout.start, 1 << 20);
        assert_eq!(
            (layout.chunk_size, layout.chunks_per_gen, layout.generations),
            (0x2000, 2, 2)
        );
        assert_eq!((layout.table, layout.data), (4096, 8192));
        assert_eq!(layout.used, [0, 0, 0, 0x300]);
        // another layout version, or chunks past the end of PM: no mechanism
        assert!(dpwc_layout(&image(3), 2 << 20).is_none());
        assert!(dpwc_layout(&image(4), (1 << 20) + 0x4000).is_none());
        assert!(dpwc_layout(&Image::zeroed(2 << 20), 2 << 20).is_none());
    }
}
