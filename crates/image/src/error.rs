//! Errors from image operations that callers can cause with bad arguments.

use std::io;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// An access of `len` bytes at `offset` does not fit an image of `image_len` bytes.
    #[error("{len}-byte access at offset {offset:#x} is outside the image of {image_len} bytes")]
    OutOfRange {
        offset: u64,
        len: u64,
        image_len: u64,
    },
    /// A hash level above [`MAX_HASH_LEVEL`](crate::MAX_HASH_LEVEL).
    #[error(
        "hash level {level} is too large: use 0..={max} (leaves of 1 KiB << level)",
        max = crate::MAX_HASH_LEVEL
    )]
    InvalidHashLevel { level: u32 },
}

impl From<ImageError> for io::Error {
    fn from(error: ImageError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, error)
    }
}
