//! The txg a pool last synced, from the uberblocks in the front labels of its main vdev:
//! its datasets claim log entries from the next txg on.

use sha2::{Digest, Sha256};

const LABEL_SIZE: usize = 256 << 10;
/// The uberblock ring's offset in a label, and its size.
const RING_OFFSET: usize = 128 << 10;
const RING_SIZE: usize = 128 << 10;
const UB_MAGIC: u64 = 0x00ba_b10c;
/// The embedded checksum trailer (`zio_eck_t`) that ends each uberblock slot.
const ECK_MAGIC: u64 = 0x0210_da7a_b10c_7a11;
const ECK_LEN: usize = 40;

/// The highest txg of an intact uberblock in the front labels of a vdev that starts at
/// the image's beginning or at one of its DOS (MBR) partitions, or `None` when there is
/// none. An uberblock counts only if its label checksum (SHA-256 with the slot's offset as
/// verifier) holds, as the pool's import requires: a slot torn by a crash is passed over.
pub fn last_synced_txg(image: &[u8]) -> Option<u64> {
    vdev_starts(image)
        .into_iter()
        .filter_map(|start| image.get(start..))
        .flat_map(|vdev| (0..2).flat_map(move |label| ring_txgs(vdev, label)))
        .max()
}

/// 0 and the start of each DOS partition (fdisk's default table).
fn vdev_starts(image: &[u8]) -> Vec<usize> {
    let mut starts = vec![0];
    if image.len() >= 512 && image[510..512] == [0x55, 0xaa] {
        for entry in image[446..510].chunks(16) {
            let lba = u32::from_le_bytes(entry[8..12].try_into().expect("4 bytes")) as usize;
            if entry[4] != 0 && entry[4] != 0xee && lba != 0 {
                starts.push(lba * 512);
            }
        }
    }
    starts
}

/// The txgs of the intact uberblocks in one label's ring, for each slot size the pool's
/// ashift can give (1 to 8 KiB).
fn ring_txgs(vdev: &[u8], label: usize) -> Vec<u64> {
    let ring_at = label * LABEL_SIZE + RING_OFFSET;
    let Some(ring) = vdev.get(ring_at..ring_at + RING_SIZE) else {
        return Vec::new();
    };
    (10..=13)
        .flat_map(|shift| {
            let slot_size = 1usize << shift;
            (0..RING_SIZE / slot_size).filter_map(move |n| {
                let slot = &ring[n * slot_size..][..slot_size];
                intact(slot, (ring_at + n * slot_size) as u64).then(|| word(slot, 16))
            })
        })
        .collect()
}

fn intact(slot: &[u8], offset: u64) -> bool {
    let eck = slot.len() - ECK_LEN;
    if word(slot, 0) != UB_MAGIC || word(slot, eck) != ECK_MAGIC {
        return false;
    }
    let mut verified = slot.to_vec();
    let verifier = [offset, 0, 0, 0];
    for (i, w) in verifier.iter().enumerate() {
        verified[eck + 8 + i * 8..][..8].copy_from_slice(&w.to_le_bytes());
    }
    let digest = Sha256::digest(&verified);
    // OpenZFS stores SHA-256 as four big-endian words, each in the pool's byte order.
    (0..4).all(|i| {
        let expected = u64::from_be_bytes(digest[i * 8..][..8].try_into().expect("8 bytes"));
        word(slot, eck + 8 + i * 8) == expected
    })
}

fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}
