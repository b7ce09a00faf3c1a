//! Plain options of the stages (the CLI converts its arguments into these).

use persim_model::{unknown_name, CacheMode, Config, Named, Scope, Strategy, UnknownName};
use serde::{Deserialize, Serialize};
use strum::{EnumString, IntoStaticStr, VariantNames};

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
    /// Which dirty lines `reads` and `global-prefix` explore.
    pub scope: Scope,
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
            scope: Scope::default(),
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
