//! Recoveries that need not run. Recovery and state extraction do the same given the same
//! bytes to read, so an image that differs from one whose recovery was traced (`reads`)
//! only in PM words that recovery did not read has that image's read set and state
//! (docs/design/model.md, "Recovery-guided images"). The failure points of a transaction
//! often differ only in lines recovery does not look at, and so do many crash images.

use crate::rundir::RunDir;
use anyhow::{Context, Result};
use persim_image::Image;

/// The images whose recoveries were traced in this run, with what each read.
#[derive(Default)]
pub(super) struct Traced {
    pm_size: u64,
    images: Vec<TracedImage>,
}

pub(super) struct TracedImage {
    pub hash: String,
    image: Image,
    /// PM words its recovery loaded before writing them, ascending.
    pub words: Vec<u64>,
}

impl Traced {
    pub fn new(pm_size: u64) -> Traced {
        Traced {
            pm_size,
            images: Vec::new(),
        }
    }

    pub fn add(&mut self, hash: String, image: Image, words: Vec<u64>) {
        self.images.push(TracedImage { hash, image, words });
    }

    /// A traced image that `image` equals in every PM word its recovery read, and
    /// everywhere outside PM.
    pub fn like(&self, image: &Image) -> Option<&TracedImage> {
        self.images.iter().find(|traced| {
            image.differs_only_in(&traced.image, &mut |word| {
                word < self.pm_size && traced.words.binary_search(&word).is_err()
            })
        })
    }
}

/// Gives image `hash` in `dir` the state saved for `like`.
pub(super) fn share_state(dir: &RunDir, like: &str, hash: &str) -> Result<()> {
    std::fs::copy(dir.state(like), dir.state(hash))
        .with_context(|| format!("cannot copy the state of image {like} to {hash}"))?;
    Ok(())
}
