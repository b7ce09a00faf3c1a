//! How users name the variants of an enum (CLI values, JSON, reports), one way for every
//! crate: `strum` derives the names in kebab-case, as serde's `rename_all = "kebab-case"`
//! spells them, and a name that matches no variant gets [`UnknownName`], which lists the
//! names there are (strum's own error says only that there was no match).
//!
//! ```ignore
//! #[derive(strum::Display, strum::EnumString, strum::VariantNames, Serialize, Deserialize)]
//! #[strum(serialize_all = "kebab-case", parse_err_ty = UnknownName, parse_err_fn = unknown_name::<Self>)]
//! #[serde(rename_all = "kebab-case")]
//! enum Strategy { … }
//! impl Named for Strategy { const WHAT: &str = "strategy"; }
//! ```

use strum::VariantNames;

/// The name of a value did not match any variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}' (expected {})", one_of(expected))]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
    pub expected: &'static [&'static str],
}

/// An enum whose variants users name: what its values are called in messages.
pub trait Named: VariantNames {
    const WHAT: &'static str;
}

/// The error of `T`'s `FromStr` (strum's `parse_err_fn`).
pub fn unknown_name<T: Named>(name: &str) -> UnknownName {
    UnknownName {
        what: T::WHAT,
        name: name.to_owned(),
        expected: T::VARIANTS,
    }
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CacheMode, FailureKind, Strategy};
    use serde::{de::DeserializeOwned, Serialize};
    use std::fmt::{Debug, Display};

    /// Every variant's name as users see it and as JSON spells it; fails when a name
    /// changes or a variant is missing from `names`.
    fn assert_names<T>(names: &[(T, &str)])
    where
        T: Copy + Debug + PartialEq + VariantNames + Display + Serialize + DeserializeOwned,
    {
        let listed: Vec<&str> = names.iter().map(|(_, name)| *name).collect();
        assert_eq!(T::VARIANTS, listed);
        for &(value, name) in names {
            assert_eq!(value.to_string(), name);
            let json = format!("\"{name}\"");
            assert_eq!(serde_json::to_string(&value).unwrap(), json);
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), value);
        }
    }

    #[test]
    fn cache_modes_and_strategies_are_named_and_parsed() {
        let caches = [
            (CacheMode::Volatile, "volatile"),
            (CacheMode::Persistent, "persistent"),
        ];
        assert_names(&caches);
        for (cache, name) in caches {
            assert_eq!(name.parse(), Ok(cache));
        }
        let strategies = [
            (Strategy::Exhaustive, "exhaustive"),
            (Strategy::GlobalPrefix, "global-prefix"),
            (Strategy::ProgramOrder, "program-order"),
            (Strategy::Reads, "reads"),
            (Strategy::Fast, "fast"),
            (Strategy::SingleLine, "single-line"),
        ];
        assert_names(&strategies);
        for (strategy, name) in strategies {
            assert_eq!(name.parse(), Ok(strategy));
        }
    }

    #[test]
    fn failure_kinds_are_named() {
        assert_names(&[
            (FailureKind::Fence, "fence"),
            (FailureKind::Checkpoint, "checkpoint"),
            (FailureKind::End, "end"),
            (FailureKind::Flush, "flush"),
            (FailureKind::Blkflush, "blkflush"),
        ]);
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let error = "exhaustiv".parse::<Strategy>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown strategy 'exhaustiv' (expected exhaustive, global-prefix, program-order, \
             reads, fast or single-line)"
        );
        let error = "eadr".parse::<CacheMode>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown cache mode 'eadr' (expected volatile or persistent)"
        );
        assert_eq!(one_of(&["only"]), "only");
    }
}
