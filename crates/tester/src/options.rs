//! Plain options of the stages (the CLI converts its arguments into these).

use persim_image::DEFAULT_HASH_LEVEL;
use persim_model::{unknown_name, CacheMode, Config, Named, Strategy, UnknownName};
use persim_vm::{Artifacts, VmConfig};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use strum::{EnumString, IntoStaticStr, VariantNames};

/// How the guest VM runs.
#[derive(Clone, Debug)]
pub struct VmOptions {
    pub config: VmConfig,
    /// The plugin and static guest tools the VM is built from.
    pub artifacts: Artifacts,
    /// Limit of each VM phase (boot, setup, traced run, shutdown) and of each image's
    /// recovery; beyond it the guest is killed and reported as hung.
    pub timeout: Duration,
    /// Limit of booting a guest (for tracing, and each extraction worker's).
    pub boot_timeout: Duration,
    /// Initramfs cache and scratch PM files.
    pub cache_dir: PathBuf,
    /// Crash images recovered in parallel (one VM each).
    pub jobs: usize,
    /// The VM phases' progress on stderr.
    pub progress: bool,
}

/// What decides the crash images of a run.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    pub cache: CacheMode,
    pub strategy: Strategy,
    pub max_images: usize,
    /// Start over in a run directory made with other inputs, instead of refusing.
    pub force: bool,
    /// Keep each crash image after its state is extracted (by default it is deleted: it
    /// can be made again from the trace, `persim debug image`).
    pub keep_images: bool,
    /// `reads`: where NT stores also persist as program-order prefixes.
    pub nt_prefixes: NtPrefixes,
}

/// Where the `reads` strategy lets a line's NT stores persist as program-order prefixes
/// (the thesis' Suvi-NT); elsewhere they go all or nothing.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    EnumString,
    IntoStaticStr,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum NtPrefixes {
    /// At the failure points where some state arises only from images with NT stores,
    /// found after the states are extracted; then those states are judged again.
    #[default]
    Auto,
    Off,
    /// At every failure point.
    All,
}

impl NtPrefixes {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl Named for NtPrefixes {
    const WHAT: &'static str = "NT-prefix mode";
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            cache: CacheMode::Volatile,
            strategy: Strategy::ProgramOrder,
            max_images: Config::DEFAULT_MAX_IMAGES,
            force: false,
            keep_images: false,
            nt_prefixes: NtPrefixes::default(),
        }
    }
}

/// Image generation from a trace.
#[derive(Clone, Debug)]
pub struct ImagesOptions {
    /// PM size; None: the trace header's.
    pub pm_size: Option<u64>,
    /// Block-device size; None: the trace header's.
    pub blk_size: Option<u64>,
    pub cache: CacheMode,
    pub strategy: Strategy,
    pub max_images: usize,
    pub seed: u64,
    /// Only failure points from this checkpoint on; earlier entries are replayed only.
    pub from_checkpoint: Option<u64>,
    pub hash_level: u32,
    /// Initial contents; None: TRACE.initial if it exists, else zeros.
    pub initial: Option<PathBuf>,
    /// Store distinct images in this directory.
    pub store: Option<PathBuf>,
    /// Keep every image's contents as hex (for `persim images --json --hex`).
    pub hex: bool,
    /// Write the images with these hashes (hex) into a directory as `<hash>.img`.
    pub materialise: Option<(BTreeSet<String>, PathBuf)>,
    /// How the `reads` strategy learns what recovery reads.
    pub guidance: Guidance,
}

/// The PM words recovery read, by the hash (hex) of the image recovered; None: unknown.
pub type ReadSets = BTreeMap<String, Option<Vec<u64>>>;

/// What the `reads` strategy knows of recovery's reads.
#[derive(Clone, Debug, Default)]
pub enum Guidance {
    /// Nothing: every dirty line is explored (`global-prefix`).
    #[default]
    Unguided,
    /// The first pass: each failure point's only image is its fully persisted one.
    FullyPersisted,
    /// The second pass: explore by the read sets of the fully persisted images, with NT
    /// prefixes where the set says.
    ReadSets(Arc<ReadSets>, NtPrefixesAt),
}

/// The failure points where `reads` explores NT prefixes.
#[derive(Clone, Debug, Default)]
pub enum NtPrefixesAt {
    #[default]
    Nowhere,
    Everywhere,
    /// These failure points (trace indices).
    Points(Arc<BTreeSet<u64>>),
}

impl NtPrefixesAt {
    pub fn includes(&self, index: u64) -> bool {
        match self {
            NtPrefixesAt::Nowhere => false,
            NtPrefixesAt::Everywhere => true,
            NtPrefixesAt::Points(points) => points.contains(&index),
        }
    }
}

impl ImagesOptions {
    /// The options of a run's images stage.
    pub fn for_run(p: &PipelineOptions, store: PathBuf) -> ImagesOptions {
        ImagesOptions {
            cache: p.cache,
            strategy: p.strategy,
            max_images: p.max_images,
            // Intervals start at checkpoint 1; what comes before (the program starting
            // up) is judged by no interval.
            from_checkpoint: Some(1),
            store: Some(store),
            ..ImagesOptions::default()
        }
    }
}

impl Default for ImagesOptions {
    fn default() -> Self {
        ImagesOptions {
            pm_size: None,
            blk_size: None,
            cache: CacheMode::Volatile,
            strategy: Strategy::Exhaustive,
            max_images: Config::DEFAULT_MAX_IMAGES,
            seed: 0,
            from_checkpoint: None,
            hash_level: DEFAULT_HASH_LEVEL,
            initial: None,
            store: None,
            hex: false,
            materialise: None,
            guidance: Guidance::Unguided,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails when a name of `--nt-prefixes` or `inputs.json` changes, or a mode is missing
    /// here.
    #[test]
    fn nt_prefix_modes_are_named_and_parsed() {
        let names = [
            (NtPrefixes::Auto, "auto"),
            (NtPrefixes::Off, "off"),
            (NtPrefixes::All, "all"),
        ];
        let listed: Vec<&str> = names.iter().map(|(_, name)| *name).collect();
        assert_eq!(NtPrefixes::VARIANTS, listed);
        for (mode, name) in names {
            assert_eq!(mode.name(), name);
            assert_eq!(name.parse(), Ok(mode));
            let json = format!("\"{name}\"");
            assert_eq!(serde_json::to_string(&mode).unwrap(), json);
            assert_eq!(serde_json::from_str::<NtPrefixes>(&json).unwrap(), mode);
        }
        assert_eq!(
            "some".parse::<NtPrefixes>().unwrap_err().to_string(),
            "unknown NT-prefix mode 'some' (expected auto, off or all)"
        );
    }
}
