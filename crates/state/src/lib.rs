//! What recovering one crash image gave: a user-visible state or a failure. The VM
//! driver produces these, analysis judges them, run directories keep them as JSON.

use persim_abi::{FS_DUMP_TIMES, RECOVERY_EPOCH, SET_BY_RECOVERY};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    /// re-serialised with sorted keys, and a timestamp field (`mtime`, …) that recovery
    /// wrote (at or after [`RECOVERY_EPOCH`], the clock recovery runs on) says
    /// [`SET_BY_RECOVERY`] instead of when; other text is kept as it is.
    pub fn state(dump: &str) -> Recovered {
        let dump = match serde_json::from_str::<Value>(dump) {
            Ok(mut value) => {
                mark_recovery_times(&mut value);
                serde_json::to_string_pretty(&value).unwrap_or_else(|_| dump.to_string())
            }
            Err(_) => dump.to_string(),
        };
        Recovered::State { dump }
    }

    /// Whether this state is `other` but for timestamps that recovery wrote here
    /// ([`SET_BY_RECOVERY`]) where `other` has a time: recovery that finishes an operation
    /// stamps it with its own clock, which no crash state can have.
    pub fn is_but_for_recovery_times(&self, other: &Recovered) -> bool {
        let (Recovered::State { dump: a }, Recovered::State { dump: b }) = (self, other) else {
            return false;
        };
        if self == other || !a.contains(SET_BY_RECOVERY) {
            return false;
        }
        match (serde_json::from_str(a), serde_json::from_str(b)) {
            (Ok(a), Ok(b)) => same_but_recovery_times(&a, &b),
            _ => false,
        }
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

fn same_but_recovery_times(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(set), Value::String(_)) if set == SET_BY_RECOVERY => true,
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && (x.iter()).all(|(k, v)| y.get(k).is_some_and(|w| same_but_recovery_times(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_but_recovery_times(v, w))
        }
        _ => a == b,
    }
}

/// Replaces the timestamps that recovery wrote, in every object of `value`.
fn mark_recovery_times(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                let seconds = field
                    .as_str()
                    .filter(|_| FS_DUMP_TIMES.contains(&name.as_str()))
                    .and_then(|time| time.split('.').next()?.parse::<i64>().ok());
                match seconds {
                    Some(seconds) if seconds >= RECOVERY_EPOCH => {
                        *field = Value::from(SET_BY_RECOVERY);
                    }
                    _ => mark_recovery_times(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mark_recovery_times),
        _ => {}
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
    fn timestamps_recovery_wrote_are_marked_and_earlier_ones_kept() {
        let dump = |mtime: &str, ctime: &str| {
            let record = format!(
                r#"{{"/mnt/f": {{"mtime": "{mtime}", "ctime": "{ctime}", "atime": "{ctime}",
                     "size": "{RECOVERY_EPOCH}"}}}}"#
            );
            match Recovered::state(&record) {
                Recovered::State { dump } => serde_json::from_str::<Value>(&dump).unwrap(),
                other => panic!("{other:?}"),
            }
        };
        let epoch = format!("{RECOVERY_EPOCH}.000000000");
        let later = format!("{}.123456789", RECOVERY_EPOCH + 5);
        let before = format!("{}.999999999", RECOVERY_EPOCH - 1);
        let a = dump(&epoch, &before);
        assert_eq!(a["/mnt/f"]["mtime"], SET_BY_RECOVERY);
        assert_eq!(a["/mnt/f"]["ctime"], before.as_str());
        assert_eq!(a["/mnt/f"]["atime"], before.as_str());
        // only timestamp fields
        assert_eq!(a["/mnt/f"]["size"], RECOVERY_EPOCH.to_string());
        // recovered at another instant: the same state
        assert_eq!(dump(&later, &before), a);
        assert_ne!(dump(&before, &before), a);
        let b = dump(&later, &later);
        assert_eq!(b["/mnt/f"]["ctime"], SET_BY_RECOVERY);
        assert_eq!(b["/mnt/f"]["atime"], SET_BY_RECOVERY);
    }

    #[test]
    fn a_state_is_another_but_for_the_times_recovery_wrote() {
        let state = |mtime: i64, size: u64| {
            Recovered::state(&format!(
                r#"{{"/mnt/f": {{"mtime": "{mtime}.5", "size": "{size}"}}}}"#
            ))
        };
        let stamped = state(RECOVERY_EPOCH + 3, 4);
        assert!(stamped.is_but_for_recovery_times(&state(RECOVERY_EPOCH - 9, 4)));
        // Not where something else differs, nor the other way round, nor itself.
        assert!(!stamped.is_but_for_recovery_times(&state(RECOVERY_EPOCH - 9, 5)));
        assert!(!state(RECOVERY_EPOCH - 9, 4).is_but_for_recovery_times(&stamped));
        assert!(!stamped.is_but_for_recovery_times(&stamped));
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
