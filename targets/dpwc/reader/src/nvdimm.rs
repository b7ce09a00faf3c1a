//! Where the PM device lies in an image of the whole NVDIMM. A Persim crash image is the
//! NVDIMM's contents; its namespace is in fsdax mode, so Linux keeps a pfn info block at
//! 4 KiB into it and `/dev/pmem0` (the DPWC cache) starts after the info block and padding.

use crate::superblock::{u32_at, u64_at, MAGIC};

/// Where the pfn info block lies in the namespace, and its signature.
const INFO_OFFSET: usize = 4096;
const INFO_SIGNATURE: &[u8; 16] = b"NVDIMM_PFN_INFO\0";
/// Fields of the info block (Linux's `struct nd_pfn_sb`).
const VERSION_MINOR: usize = 54;
const DATAOFF: usize = 56;
const START_PAD: usize = 76;
const END_TRUNC: usize = 80;

/// The PM device within `image`: the image itself if it starts with a DPWC superblock or
/// has no pfn info block, else the part the info block describes. Returns the device's
/// byte offset in the image with its bytes.
pub fn pm_device(image: &[u8]) -> (u64, &[u8]) {
    let info = image.get(INFO_OFFSET..INFO_OFFSET + 128);
    match info {
        Some(info) if !image.starts_with(&MAGIC) && info.starts_with(INFO_SIGNATURE) => {
            // start_pad and end_trunc exist from minor version 1 on.
            let (start_pad, end_trunc) =
                if u16::from_le_bytes([info[VERSION_MINOR], info[VERSION_MINOR + 1]]) >= 1 {
                    (u32_at(info, START_PAD), u32_at(info, END_TRUNC))
                } else {
                    (0, 0)
                };
            let start = u64::from(start_pad).saturating_add(u64_at(info, DATAOFF));
            let end = (image.len() as u64).saturating_sub(u64::from(end_trunc));
            match image.get(start as usize..end as usize) {
                Some(device) => (start, device),
                None => (0, image),
            }
        }
        _ => (0, image),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_info_block_moves_the_device() {
        let mut image = vec![0u8; 1 << 20];
        image[INFO_OFFSET..INFO_OFFSET + 16].copy_from_slice(INFO_SIGNATURE);
        image[INFO_OFFSET + VERSION_MINOR] = 4;
        image[INFO_OFFSET + DATAOFF..INFO_OFFSET + DATAOFF + 8]
            .copy_from_slice(&(64u64 << 10).to_le_bytes());
        image[INFO_OFFSET + END_TRUNC..INFO_OFFSET + END_TRUNC + 4]
            .copy_from_slice(&4096u32.to_le_bytes());
        let (offset, device) = pm_device(&image);
        assert_eq!(
            (offset, device.len()),
            (64 << 10, (1 << 20) - (64 << 10) - 4096)
        );
    }

    #[test]
    fn a_device_image_is_the_device() {
        let image = vec![0u8; 8192];
        assert_eq!(pm_device(&image), (0, &image[..]));
        let mut cache = vec![0u8; 8192];
        cache[..8].copy_from_slice(&MAGIC);
        cache[INFO_OFFSET..INFO_OFFSET + 16].copy_from_slice(INFO_SIGNATURE);
        assert_eq!(pm_device(&cache).0, 0);
    }
}
