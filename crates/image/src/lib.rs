//! Persim crash images: copy-on-write memory images with memoised BLAKE3 hashing, and a
//! store that keeps each distinct image once with the origins that produced it.
//! Design and measurements: docs/images.md.

mod diff;
mod error;
mod hash_tree;
mod image;
mod reflink;
mod store;
mod tree;

pub use error::ImageError;
pub use image::{Image, DEFAULT_HASH_LEVEL, MAX_HASH_LEVEL};
pub use store::{ImageStore, Record};
