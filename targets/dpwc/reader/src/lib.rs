//! Reads the on-PM format of dm-dpwc, the DPWC write cache (layout version 4, docs/design/dpwc.md):
//! the superblock, the generation table, the valid entries of every live generation as
//! recovery walks them, and what recovery's replay writes to the origin.
//!
//! A PM image is the PM device as bytes, or the whole NVDIMM whose fsdax namespace holds it
//! (a Persim crash image; [`pm_device`] finds the device after Linux's pfn info block):
//!
//! ```
//! use dpwc_reader::{Cache, ImageBuilder, Op, SectorState, Superblock};
//!
//! let mut builder = ImageBuilder::format(Superblock::new(8192, 2, 2, 1024));
//! builder.open_generation(0, 1);
//! builder.append(0, 1, 1, Op::Write { sector: 8, data: &[7; 512] });
//! let image = builder.into_image();
//! let cache = Cache::parse(&image)?;
//! assert_eq!(cache.replay_order().len(), 1);
//! assert_eq!(cache.replay().get(8), Some(SectorState::Written(&[7; 512][..])));
//! # Ok::<(), dpwc_reader::SuperblockError>(())
//! ```

mod builder;
mod cache;
mod entry;
mod nvdimm;
mod replay;
mod superblock;
mod word;

pub use builder::{ImageBuilder, Op};
pub use cache::{Cache, Chunk, Generation, GEN_HELD_BIT};
pub use entry::{
    header_crc, CorruptEntry, Corruption, Entry, Header, FLAG_DISCARD, HEADER_LEN, SECTOR,
};
pub use nvdimm::pm_device;
pub use replay::{Extent, ExtentSummary, SectorMap, SectorState};
pub use superblock::{Superblock, SuperblockError};
pub use word::{seal, unseal, GEN_WORD_BYTES, USED_WORD_BYTES};
