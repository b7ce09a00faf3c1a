//! What recovering one crash image gave: a user-visible state or a failure.

use serde::{Deserialize, Serialize};

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

    /// A short name of the outcome for tables.
    pub fn outcome(&self) -> &'static str {
        match self {
            Recovered::State { .. } => "state",
            Recovered::RecoveryError { .. } => "recovery-error",
            Recovered::GuestCrash { .. } => "guest-crash",
            Recovered::Hang { .. } => "hang",
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
}
