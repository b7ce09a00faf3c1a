//! Where an OpenZFS pool's vdev labels lie on the block device, read from the initial
//! image: a label (256 KiB) holds its configuration (112 KiB from 16 KiB on, ending in an
//! embedded checksum's magic) and its uberblock ring (the last 128 KiB, at least one
//! uberblock with its magic). Labels are found at any 512-byte boundary, since a pool may
//! sit in a partition (docs/design/model.md, "OpenZFS transaction groups").

use crate::layout_bytes::{le64, read};
use crate::Image;
use persim_model::{ZfsLayout, ZFS_ECK_MAGIC, ZFS_LABEL_SIZE};

const SECTOR: u64 = 512;
/// Where the configuration's embedded checksum lies in a label.
const CONFIG_ECK_AT: u64 = (16 << 10) + (112 << 10) - 40;
/// The uberblock ring's place in a label.
const RING_AT: u64 = 128 << 10;
const UBERBLOCK_MAGIC: u64 = 0x00ba_b10c;
/// The smallest uberblock slot (1 KiB; larger sectors make larger slots).
const SLOT: u64 = 1 << 10;

/// The labels of the pools on the block device of `image` (after `pm_size` bytes of PM);
/// `None` when there is none.
pub fn zfs_layout(image: &Image, pm_size: u64) -> Option<ZfsLayout> {
    let blk_size = image.len().checked_sub(pm_size)?;
    let le64_at = |at: u64| le64(&read(image, pm_size + at, 8), 0);
    let labels: Vec<u64> = (0..blk_size.saturating_sub(ZFS_LABEL_SIZE - SECTOR))
        .step_by(SECTOR as usize)
        .filter(|&at| le64_at(at + CONFIG_ECK_AT) == ZFS_ECK_MAGIC)
        .filter(|&at| {
            (RING_AT..ZFS_LABEL_SIZE)
                .step_by(SLOT as usize)
                .any(|slot| le64_at(at + slot) == UBERBLOCK_MAGIC)
        })
        .collect();
    (!labels.is_empty()).then_some(ZfsLayout { labels })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PM: u64 = 1 << 20;

    fn put(image: &mut Image, at: u64, word: u64) {
        image.write(PM + at, &word.to_le_bytes());
    }

    /// Labels at 16 KiB and 272 KiB of an 8 MiB disk (a partition's first two), the
    /// second with its uberblock in its sixth 4 KiB slot.
    fn disk() -> Image {
        let mut image = Image::zeroed(PM + (8 << 20));
        for (label, slot) in [(16 << 10, 0), (272 << 10, 5 * 4096)] {
            put(&mut image, label + CONFIG_ECK_AT, ZFS_ECK_MAGIC);
            put(&mut image, label + RING_AT + slot, UBERBLOCK_MAGIC);
        }
        image
    }

    #[test]
    fn finds_labels_at_a_partitions_offset() {
        let layout = zfs_layout(&disk(), PM).unwrap();
        assert_eq!(layout.labels, vec![16 << 10, 272 << 10]);
    }

    #[test]
    fn a_configuration_without_an_uberblock_is_no_label() {
        let mut image = Image::zeroed(PM + (8 << 20));
        put(&mut image, (64 << 10) + CONFIG_ECK_AT, ZFS_ECK_MAGIC);
        assert_eq!(zfs_layout(&image, PM), None);
        assert_eq!(zfs_layout(&Image::zeroed(PM), PM), None, "no block device");
    }
}
