//! What recovering one crash image gave: a user-visible state or a failure. The VM
//! driver produces these, analysis judges them, run directories keep them as JSON.

use serde::{Deserialize, Serialize};
use strum::{Display, IntoStaticStr, VariantNames};

/// The result of recovering a crash image and extracting its state.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Recovered {
    /// Recovery worked; `dump` is the state extractor's normalised output (fs-dump JSON).
    State { dump: String },
    /// The recovery command (mount, fsck, …) failed.
    RecoveryError { output: String },
    /// The guest kernel oopsed or panicked during recovery.
    GuestCrash { output: String },
    /// Recovery did not finish in time.
    Hang { output: String },
}

/// The kind of a recovery result, as reports and tables name it.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Display,
    IntoStaticStr,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Outcome {
    State,
    RecoveryError,
    GuestCrash,
    Hang,
    /// No result for the image: a verdict over a store whose states are incomplete.
    NotExtracted,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl Recovered {
    /// The extracted state, normalised so that equal states compare equal: JSON is
    /// re-serialised with sorted keys, other text is kept as it is.
    pub fn state(dump: &str) -> Recovered {
        let dump = match serde_json::from_str::<serde_json::Value>(dump) {
            Ok(value) => serde_json::to_string_pretty(&value).unwrap_or_else(|_| dump.to_string()),
            Err(_) => dump.to_string(),
        };
        Recovered::State { dump }
    }

    pub fn is_error(&self) -> bool {
        !matches!(self, Recovered::State { .. })
    }

    pub fn outcome(&self) -> Outcome {
        match self {
            Recovered::State { .. } => Outcome::State,
            Recovered::RecoveryError { .. } => Outcome::RecoveryError,
            Recovered::GuestCrash { .. } => Outcome::GuestCrash,
            Recovered::Hang { .. } => Outcome::Hang,
        }
    }

    /// The text a person compares: the dump, or the failure's output.
    pub fn text(&self) -> &str {
        match self {
            Recovered::State { dump } => dump,
            Recovered::RecoveryError { output }
            | Recovered::GuestCrash { output }
            | Recovered::Hang { output } => output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_states_are_normalised() {
        let a = Recovered::state(r#"{"b": 1, "a": {"y": 2, "x": 3}}"#);
        let b = Recovered::state("{\"a\":{\"x\":3,\"y\":2},\"b\":1}");
        assert_eq!(a, b);
        assert_ne!(a, Recovered::state(r#"{"b": 2, "a": {"y": 2, "x": 3}}"#));
        assert!(!a.is_error());
        assert!(Recovered::Hang {
            output: String::new()
        }
        .is_error());
    }

    #[test]
    fn outcomes_serialise_as_their_names() {
        let names = [
            (Outcome::State, "state"),
            (Outcome::RecoveryError, "recovery-error"),
            (Outcome::GuestCrash, "guest-crash"),
            (Outcome::Hang, "hang"),
            (Outcome::NotExtracted, "not-extracted"),
        ];
        let listed: Vec<&str> = names.iter().map(|(_, name)| *name).collect();
        assert_eq!(Outcome::VARIANTS, listed);
        for (outcome, name) in names {
            assert_eq!(outcome.name(), name);
            // tables pad it
            assert_eq!(format!("{outcome:<8}|"), format!("{name:<8}|"));
            let json = serde_json::to_string(&outcome).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), outcome);
        }
        let hang = Recovered::Hang {
            output: String::new(),
        };
        assert_eq!(hang.outcome(), Outcome::Hang);
        let json = serde_json::to_value(&hang).unwrap();
        assert_eq!(json["outcome"], "hang");
    }
}
