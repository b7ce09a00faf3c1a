//! Where a crash image came from: the failure point and how its pending units were chosen.

use serde::{Deserialize, Serialize};
use strum::{Display, VariantNames};

/// What kind of trace entry a failure point sits at.
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
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum FailureKind {
    /// Just before a fence takes effect.
    Fence,
    /// At a `hypercall checkpoint N`.
    Checkpoint,
    /// After the last entry.
    End,
    /// Just before a flush (only the `program-order` strategy adds these).
    Flush,
    /// Just before a block-device flush takes effect.
    Blkflush,
}

/// A place in the trace where a crash is simulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FailurePoint {
    /// Index of the entry the failure point sits before (the trace length for `End`).
    pub index: u64,
    pub kind: FailureKind,
    /// The last checkpoint reached before this point, if any.
    pub checkpoint: Option<u64>,
}

/// How the pending units that made it to PM were chosen.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "choice", rename_all = "kebab-case")]
pub enum Choice {
    /// No pending unit reached PM.
    Nothing,
    /// Every pending unit reached PM.
    Everything,
    /// Exhaustive enumeration: the `number`-th of `of` combinations of per-line prefixes.
    Enumerated { number: u64, of: u64 },
    /// A seeded random draw, used when the set exceeds the image cap.
    Sampled { seed: u64, draw: u64 },
    /// The thesis strategy: every pending unit up to the `cut`-th in global order, plus
    /// the whole pending sequences of `lines` (line addresses).
    GlobalPrefix { cut: u64, lines: Vec<u64> },
    /// `reads` with NT prefixes: the first `units` pending units of `line`, with every
    /// other pending unit lost or durable.
    NtPrefix {
        line: u64,
        units: u64,
        others_durable: bool,
    },
    /// `single-line`: every other pending unit lost and `line`'s persisted
    /// (`persisted`), or every other one durable and `line`'s lost.
    SingleLine { line: u64, persisted: bool },
}

/// One reason a crash image exists.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Origin {
    #[serde(flatten)]
    pub point: FailurePoint,
    /// How the pending PM units were chosen.
    #[serde(flatten)]
    pub choice: Choice,
    /// How the pending block writes were chosen; absent when none were pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<Choice>,
}
