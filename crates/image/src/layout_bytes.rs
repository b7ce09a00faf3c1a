//! Reading an on-media layout's fields from an image: bytes at an offset (zeros past the
//! image's end, so a truncated image fails the layout's own checks) and integers in them.

use crate::Image;

pub(crate) fn read(image: &Image, at: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    if at.saturating_add(len as u64) <= image.len() {
        image.read(at, &mut bytes);
    }
    bytes
}

pub(crate) fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

pub(crate) fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}
