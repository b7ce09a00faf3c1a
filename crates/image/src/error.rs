//! Errors from image operations that callers can cause with bad arguments.

use std::fmt;
use std::io;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// An access of `len` bytes at `offset` does not fit an image of `image_len` bytes.
    OutOfRange {
        offset: u64,
        len: u64,
        image_len: u64,
    },
    /// A hash level above [`MAX_HASH_LEVEL`](crate::MAX_HASH_LEVEL).
    InvalidHashLevel { level: u32 },
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::OutOfRange {
                offset,
                len,
                image_len,
            } => write!(
                f,
                "{len}-byte access at offset {offset:#x} is outside the image of {image_len} bytes"
            ),
            ImageError::InvalidHashLevel { level } => write!(
                f,
                "hash level {level} is too large: use 0..={} (leaves of 1 KiB << level)",
                crate::MAX_HASH_LEVEL
            ),
        }
    }
}

impl std::error::Error for ImageError {}

impl From<ImageError> for io::Error {
    fn from(error: ImageError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, error)
    }
}
