//! The Persim crash model (docs/design/model.md): replaying a trace, keeping the pending state,
//! and choosing which crash images each strategy materialises.

mod block;
mod check;
mod config;
mod dpwc_log;
mod guide;
mod jbd2;
mod mechanism;
mod memory;
mod names;
mod origin;
mod pending;
mod pmemobj_log;
mod program_pm;
mod replay;
mod rng;
mod rule_log;
mod runtime_data;
mod strategy;
mod unit;
mod writecache_log;
mod xfs_log;
mod zfs_pool;
mod zil_blocks;
mod zil_pmem_log;

pub use check::{check_crash_images, CheckReport, Violation};
pub use config::{CacheMode, Config, Scope, Strategy};
pub use dpwc_log::DpwcLayout;
pub use guide::{Explored, ReadGuide};
pub use jbd2::{JournalExtent, JournalLayout, JournalViolation, LogKind};
pub use memory::{
    for_each_crash_image, replay_in_memory, replay_in_memory_guided, ImageCounts, PointImages,
    WordsRead,
};
pub use names::{unknown_name, Named, UnknownName};
pub use origin::{Choice, FailureKind, FailurePoint, Origin};
pub use pending::LineState;
pub use pmemobj_log::PmemobjLayout;
pub use replay::{FailureView, ModelError, Replay, Sink};
pub use rng::SplitMix64;
pub use strategy::{CrashImage, CrashImages};
pub use unit::{Unit, LINE, WORD};
pub use writecache_log::WritecacheLayout;
pub use xfs_log::XfsLogLayout;
pub use zfs_pool::{ZfsLayout, ZFS_ECK_MAGIC, ZFS_LABEL_SIZE};
pub use zil_pmem_log::{
    zil_pmem_entry_fits, ZilPmemLayout, ZIL_PMEM_SLOT, ZIL_PMEM_SUPERBLOCK_SPACE,
};
