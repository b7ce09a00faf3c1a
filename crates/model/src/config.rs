//! How a replay is configured: cache mode, strategy, image cap and region sizes.

use crate::dpwc_log::DpwcLayout;
use crate::jbd2::JournalLayout;
use crate::names::{unknown_name, Named, UnknownName};
use crate::pmemobj_log::PmemobjLayout;
use crate::writecache_log::WritecacheLayout;
use crate::xfs_log::XfsLogLayout;
use crate::zfs_pool::ZfsLayout;
use crate::zil_pmem_log::ZilPmemLayout;
use serde::{Deserialize, Serialize};
use strum::{Display, EnumString, VariantNames};

/// Whether CPU caches survive a crash (docs/design/model.md: volatile caches vs eADR).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum CacheMode {
    #[default]
    Volatile,
    Persistent,
}

/// Which crash images to materialise at each failure point.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum Strategy {
    /// Exactly the model's set (a seeded sample above the cap).
    #[default]
    Exhaustive,
    /// The thesis strategy: a cut of the global order × subsets of dirty lines.
    GlobalPrefix,
    /// Nothing or everything pending; failure points at flushes added.
    ProgramOrder,
    /// Recovery-guided (the thesis' Suvi-Reads): `global-prefix` over only the dirty lines
    /// a recovery of the fully persisted image reads; the other dirty lines follow the
    /// cut (docs/design/model.md). Without read sets it explores every line, as `global-prefix`.
    Reads,
    /// The thesis' Suvi-Fast: failure points at flushes and fences, each with the one image
    /// that applies every pending store, skipped when a failure point with the same code
    /// location (pc and stack) was seen; checkpoints as `program-order`.
    Fast,
    /// Nothing and everything pending, plus, per dirty line, the image where only that
    /// line's pending stores persist and the one where only they are lost: 2 + 2 × lines
    /// images per failure point, deterministic (docs/design/model.md).
    SingleLine,
}

/// Which dirty lines `reads` and `global-prefix` explore (docs/design/model.md, "Program
/// scope").
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum Scope {
    /// Only lines that can change what the program under test recovers to: once a traced
    /// program has accessed PM from user space, the lines in the pages it accessed (the
    /// kernel's other lines follow the cut); of a file system with a jbd2 journal or an XFS
    /// log, the lines it does not protect while its ordering rules hold; of a libpmemobj
    /// pool, the lines its transaction logs do not restore while their rules hold.
    #[default]
    Program,
    /// Every dirty line.
    All,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub cache: CacheMode,
    pub strategy: Strategy,
    /// Images per failure point above which a seeded sample is taken instead.
    pub max_images: usize,
    /// Seed of that sample, so runs are reproducible.
    pub seed: u64,
    /// PM size in bytes; PM stores must fall inside it.
    pub pm_size: u64,
    /// Block-device size in bytes (0 when there is none). In a crash image the block
    /// device's contents follow the PM contents, at offset `pm_size`.
    pub blk_size: u64,
    /// `reads` at every failure point: NT units also persist as program-order prefixes
    /// (by default a line's NT units go all or nothing).
    pub nt_prefixes: bool,
    pub scope: Scope,
    /// A jbd2 journal in PM (the file system's on-media format says where): under
    /// `Scope::Program` the lines it protects follow the cut while its rules hold.
    pub journal: Option<JournalLayout>,
    /// An XFS file system's internal log in PM (version 5): under `Scope::Program` the
    /// record bodies follow the cut while its rules hold.
    pub xfs_log: Option<XfsLogLayout>,
    /// A DPWC log on PM: under `Scope::Program` entry lines past their chunk's `used`
    /// follow the cut while its rules hold.
    pub dpwc: Option<DpwcLayout>,
    /// dm-writecache's cache on PM: under `Scope::Program` data of blocks no crash image
    /// commits follows the cut while its rules hold.
    pub writecache: Option<WritecacheLayout>,
    /// ZIL-PMEM's region in OpenZFS: under `Scope::Program` lines past where each chunk's
    /// walk stops follow the cut while its rule holds.
    pub zil_pmem: Option<ZilPmemLayout>,
    /// An OpenZFS pool's labels on the block device: under `Scope::Program` pending block
    /// writes no uberblock can reference yet follow the cut while its rule holds.
    pub zfs: Option<ZfsLayout>,
    /// A libpmemobj pool's lanes in PM: under `Scope::Program` their logs' rules are
    /// checked.
    pub pmemobj: Option<PmemobjLayout>,
}

impl Config {
    pub const DEFAULT_MAX_IMAGES: usize = 4096;

    pub fn new(pm_size: u64) -> Config {
        Config {
            cache: CacheMode::default(),
            strategy: Strategy::default(),
            max_images: Self::DEFAULT_MAX_IMAGES,
            seed: 0,
            pm_size,
            blk_size: 0,
            nt_prefixes: false,
            scope: Scope::default(),
            journal: None,
            xfs_log: None,
            dpwc: None,
            writecache: None,
            zil_pmem: None,
            zfs: None,
            pmemobj: None,
        }
    }

    /// The defaults for replaying a recorded trace of a machine with the sizes its header
    /// gives; a hand-written trace that does not say its PM size gets one that holds any
    /// store.
    pub fn of_header(header: &persim_trace::Header) -> Config {
        let pm_size = if header.pm_size > 0 {
            header.pm_size
        } else {
            u64::MAX / 2
        };
        Config {
            blk_size: header.blk_size,
            ..Config::new(pm_size)
        }
    }

    /// Length of a crash image: PM followed by the block device.
    pub fn image_len(&self) -> u64 {
        self.pm_size + self.blk_size
    }
}

impl Named for CacheMode {
    const WHAT: &'static str = "cache mode";
}

impl Named for Strategy {
    const WHAT: &'static str = "strategy";
}

impl Named for Scope {
    const WHAT: &'static str = "scope";
}
