//! Plain options of the stages (the CLI converts its arguments into these).

use persim_model::{CacheMode, Config, Strategy};
use serde::{Deserialize, Serialize};

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NtPrefixes {
    /// At the failure points where some state arises only from images with NT stores,
    /// found after the states are extracted; then those states are judged again.
    #[default]
    Auto,
    Off,
    /// At every failure point.
    All,
}

impl std::str::FromStr for NtPrefixes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [NtPrefixes::Auto, NtPrefixes::Off, NtPrefixes::All]
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| format!("unknown NT-prefix mode '{s}' (expected auto, off or all)"))
    }
}

impl NtPrefixes {
    pub fn name(self) -> &'static str {
        match self {
            NtPrefixes::Auto => "auto",
            NtPrefixes::Off => "off",
            NtPrefixes::All => "all",
        }
    }
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
