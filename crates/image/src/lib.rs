//! Persim crash images: copy-on-write memory images with memoised BLAKE3 hashing, a store
//! that keeps each distinct image once with the origins that produced it, and the engine
//! that makes a trace's crash images through the crash model (`generate_images`, whose
//! failure points `images.json` lists). Design and measurements: docs/design/images.md.

mod diff;
mod dpwc_log;
mod error;
mod ext4_journal;
mod fault;
mod fully_persisted;
mod generate;
mod hash_tree;
mod image;
mod images_json;
mod layout_bytes;
mod pmemobj_pool;
mod reflink;
mod store;
mod tree;
mod writecache;
mod xfs_log;
mod zfs_labels;
mod zil_pmem_log;

pub use dpwc_log::dpwc_layout;
pub use error::ImageError;
pub use ext4_journal::journal_layout;
pub use fault::{plan_faults, Fault, FaultKind, UnknownFaultKind, PAGE};
pub use fully_persisted::{fully_persisted_images, FullyPersistedImages};
pub use generate::{
    generate_images, GenerateError, GenerateOptions, Generated, Guidance, Materialise,
    NtPrefixesAt, Points, Progress, ReadSets,
};
pub use image::{Image, DEFAULT_HASH_LEVEL, MAX_HASH_LEVEL};
pub use images_json::{
    ImageRecord, ImagesIndex, ImagesJsonWriter, PointReads, PointRecord, PointSink, ReadIndexError,
};
pub use pmemobj_pool::pmemobj_layout;
pub use store::{ImageStore, Record};
pub use writecache::writecache_layout;
pub use xfs_log::xfs_log_layout;
pub use zfs_labels::zfs_layout;
pub use zil_pmem_log::zil_pmem_layout;
