//! Judging a corrupted image's recovery against the uncorrupted one's
//! (docs/guides/faults.md): each fault masked, corrected, detected, silent or a crash, and a
//! campaign's summary per fault kind
//! and place, with the bytes at risk, in the manner of NOVA-Fortis' figure 2.3.

use crate::diff::line_diff;
use persim_state::Recovered;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use strum::{Display, EnumIter, IntoEnumIterator, IntoStaticStr};

/// What recovering a corrupted image gave, against the uncorrupted image's state.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumIter,
    IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum FaultOutcome {
    /// The state equals the uncorrupted image's and recovery said nothing of the fault.
    Masked,
    /// The state equals the uncorrupted image's and recovery reported the corruption: it
    /// noticed and repaired it (NOVA-Fortis' replicas, a parity, an error-correcting code).
    Corrected,
    /// The state differs and recovery or the state command failed (a failed mount, a non-zero exit), or the
    /// kernel logged a checksum failure or corruption.
    Detected,
    /// Recovery succeeded and the state differs: wrong data without a word.
    Silent,
    /// The guest kernel oopsed or panicked, or recovery hung.
    Crash,
}

impl FaultOutcome {
    /// Whether it is a finding (`persim faults` exits 1).
    pub fn is_finding(self) -> bool {
        matches!(self, FaultOutcome::Silent | FaultOutcome::Crash)
    }
}

/// What kernel messages say when a file system finds a checksum that fails or metadata
/// that makes no sense, or repairs it (matched in lower case): XFS's "Metadata CRC error
/// detected", "log record CRC mismatch", "Torn write (CRC failure) detected" and "Metadata
/// corruption detected"; ext4's "checksum invalid", "bad block bitmap checksum" and jbd2's
/// "Invalid checksum"; NOVA-Fortis' "checksum corruption repaired!" and "error repaired".
const DETECTION_WORDS: [&str; 6] = [
    "checksum",
    "crc error",
    "crc mismatch",
    "crc failure",
    "corrupt",
    "repaired",
];

/// The messages of a corrupted image's kernel log (`log`) that report a checksum failure,
/// corruption or a repair, except those the uncorrupted image's recovery logged too
/// (`baseline_log`): a crash image's torn log is no fault's doing, and a banner printed at
/// every mount (NOVA's `metadata checksum 0, …`) says nothing of the fault.
pub fn detection_messages(log: &[String], baseline_log: &[String]) -> Vec<String> {
    log.iter()
        .filter(|line| {
            let line = line.to_lowercase();
            DETECTION_WORDS.iter().any(|word| line.contains(word))
        })
        .filter(|line| !baseline_log.contains(line))
        .cloned()
        .collect()
}

/// The outcome of a fault whose image recovered to `faulted`, where the uncorrupted image
/// recovered to `baseline` (a state); `detections` are the messages of its kernel log that
/// report the corruption ([`detection_messages`]): the file system noticed it, and either
/// gave the uncorrupted state back (corrected) or not (detected).
pub fn classify_fault(
    baseline: &Recovered,
    faulted: &Recovered,
    detections: &[String],
) -> FaultOutcome {
    match faulted {
        Recovered::GuestCrash { .. } | Recovered::Hang { .. } => FaultOutcome::Crash,
        Recovered::RecoveryError { .. } => FaultOutcome::Detected,
        Recovered::State { .. } => match (faulted == baseline, detections.is_empty()) {
            (true, true) => FaultOutcome::Masked,
            (true, false) => FaultOutcome::Corrected,
            (false, false) => FaultOutcome::Detected,
            (false, true) => FaultOutcome::Silent,
        },
    }
}

/// The bytes of the uncorrupted state that a silently corrupted one changed or lost: the
/// length of the lines the diff removes from `baseline`.
pub fn state_bytes_lost(baseline: &Recovered, faulted: &Recovered) -> u64 {
    line_diff(baseline.text(), faulted.text(), 0)
        .lines()
        .filter_map(|line| line.strip_prefix("- "))
        .map(|line| line.len() as u64 + 1)
        .sum()
}

/// One fault's result, as a summary counts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultTally {
    /// The fault kind (`bitflip`, `scribble:64`, …).
    pub kind: String,
    /// Where it was drawn from (`metadata`, `data`, `written`, `any`).
    pub place: String,
    pub outcome: FaultOutcome,
    /// Silent: the state bytes lost ([`state_bytes_lost`]); otherwise 0.
    pub bytes_lost: u64,
}

/// The share of each outcome among the faults of one kind and place.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultRow {
    pub kind: String,
    pub place: String,
    pub faults: u64,
    /// Faults per outcome (every outcome named, zeros included).
    pub outcomes: BTreeMap<FaultOutcome, u64>,
    /// Expected bytes of user-visible state lost silently per fault.
    pub bytes_at_risk: f64,
}

impl FaultRow {
    /// The share of `outcome` among the row's faults, 0 to 1.
    pub fn share(&self, outcome: FaultOutcome) -> f64 {
        let n = self.outcomes.get(&outcome).copied().unwrap_or(0);
        n as f64 / self.faults.max(1) as f64
    }
}

/// A campaign's results per fault kind and place, in the order they first appear.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultSummary {
    pub rows: Vec<FaultRow>,
}

impl FaultSummary {
    pub fn of(tallies: &[FaultTally]) -> FaultSummary {
        let mut rows: Vec<FaultRow> = Vec::new();
        for tally in tallies {
            let at = match rows
                .iter()
                .position(|r| r.kind == tally.kind && r.place == tally.place)
            {
                Some(at) => at,
                None => {
                    rows.push(FaultRow {
                        kind: tally.kind.clone(),
                        place: tally.place.clone(),
                        outcomes: FaultOutcome::iter().map(|o| (o, 0)).collect(),
                        ..FaultRow::default()
                    });
                    rows.len() - 1
                }
            };
            let row = &mut rows[at];
            row.faults += 1;
            *row.outcomes.entry(tally.outcome).or_default() += 1;
            // A running mean: the total lost over the faults so far.
            row.bytes_at_risk += (tally.bytes_lost as f64 - row.bytes_at_risk) / row.faults as f64;
        }
        FaultSummary { rows }
    }

    /// A table for people: one row per kind and place, each outcome's share in percent.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{:<14} {:<9} {:>6} {:>7} {:>9} {:>9} {:>7} {:>7} {:>14}\n",
            "kind",
            "where",
            "faults",
            "masked",
            "corrected",
            "detected",
            "silent",
            "crash",
            "bytes at risk"
        );
        for row in &self.rows {
            let pct = |o| format!("{:.0}%", 100.0 * row.share(o));
            out.push_str(&format!(
                "{:<14} {:<9} {:>6} {:>7} {:>9} {:>9} {:>7} {:>7} {:>14.1}\n",
                row.kind,
                row.place,
                row.faults,
                pct(FaultOutcome::Masked),
                pct(FaultOutcome::Corrected),
                pct(FaultOutcome::Detected),
                pct(FaultOutcome::Silent),
                pct(FaultOutcome::Crash),
                row.bytes_at_risk
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_follow_the_recovery_and_the_state() {
        let baseline = Recovered::state(r#"{"/mnt/a": {"data": "hello"}}"#);
        let other = Recovered::state(r#"{"/mnt/a": {"data": "jello"}}"#);
        let failed = |output: &str| Recovered::RecoveryError {
            output: output.into(),
        };
        assert_eq!(
            classify_fault(&baseline, &baseline, &[]),
            FaultOutcome::Masked
        );
        assert_eq!(classify_fault(&baseline, &other, &[]), FaultOutcome::Silent);
        assert_eq!(
            classify_fault(&baseline, &failed("mount: Bad message"), &[]),
            FaultOutcome::Detected
        );
        let oops = Recovered::GuestCrash { output: "".into() };
        let hang = Recovered::Hang { output: "".into() };
        assert_eq!(classify_fault(&baseline, &oops, &[]), FaultOutcome::Crash);
        assert_eq!(classify_fault(&baseline, &hang, &[]), FaultOutcome::Crash);
        assert!(FaultOutcome::Silent.is_finding() && FaultOutcome::Crash.is_finding());
        assert!(!FaultOutcome::Detected.is_finding() && !FaultOutcome::Masked.is_finding());
        assert_eq!(state_bytes_lost(&baseline, &baseline), 0);
        // The one line of the dump that holds the data changed.
        let lost = state_bytes_lost(&baseline, &other);
        assert!(lost > "hello".len() as u64, "{lost}");
    }

    #[test]
    fn a_checksum_message_in_the_kernel_log_is_detection() {
        let baseline = Recovered::state(r#"{"/mnt/a": {"data": "hello"}}"#);
        let other = Recovered::state(r#"{"/mnt/a": {"data": "jello"}}"#);
        let log = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        let torn = "XFS (pmem0): Torn write (CRC failure) detected at log block 0x10. \
                    Truncating head block from 0x18.";
        let faulted = log(&[
            "XFS (pmem0): Mounting V5 Filesystem",
            "EXT4-fs error (device pmem0): ext4_lookup:1855: inode #2: comm ls: \
             iget: checksum invalid",
            torn,
            "XFS (pmem0): Metadata corruption detected at xfs_dinode_verify+0x1a/0x60",
            "XFS (pmem0): log record CRC mismatch: found 0x1, expected 0x2.",
            "XFS (pmem0): Metadata CRC error detected at xfs_agf_read_verify+0x1d/0x110",
        ]);
        let found = detection_messages(&faulted, &[]);
        assert_eq!(found, faulted[1..].to_vec());
        // A message the uncorrupted image's recovery gave too is not the fault's.
        let found = detection_messages(&faulted, &log(&[torn]));
        assert_eq!(found.len(), 4);
        assert!(!found.contains(&torn.to_string()));
        assert!(detection_messages(&log(&["XFS (pmem0): Ending clean mount"]), &[]).is_empty());
        // The state may differ or not: the file system said so.
        let message = log(&["EXT4-fs error (device pmem0): checksum invalid"]);
        assert_eq!(
            classify_fault(&baseline, &other, &message),
            FaultOutcome::Detected
        );
        // The state is the uncorrupted one and recovery said so: it repaired the fault.
        assert_eq!(
            classify_fault(&baseline, &baseline, &message),
            FaultOutcome::Corrected
        );
        let repaired = log(&["nova: nova_verify_data_csum: checksum corruption repaired!"]);
        assert_eq!(detection_messages(&repaired, &[]), repaired);
        assert!(!FaultOutcome::Corrected.is_finding());
        let oops = Recovered::GuestCrash { output: "".into() };
        assert_eq!(
            classify_fault(&baseline, &oops, &message),
            FaultOutcome::Crash
        );
    }

    #[test]
    fn a_summary_counts_shares_and_bytes_at_risk_per_kind_and_place() {
        let tally = |kind: &str, place: &str, outcome, bytes_lost| FaultTally {
            kind: kind.into(),
            place: place.into(),
            outcome,
            bytes_lost,
        };
        let summary = FaultSummary::of(&[
            tally("bitflip", "data", FaultOutcome::Silent, 30),
            tally("bitflip", "data", FaultOutcome::Silent, 10),
            tally("bitflip", "data", FaultOutcome::Masked, 0),
            tally("bitflip", "data", FaultOutcome::Detected, 0),
            tally("page", "metadata", FaultOutcome::Crash, 0),
        ]);
        assert_eq!(summary.rows.len(), 2);
        let data = &summary.rows[0];
        assert_eq!((data.faults, data.share(FaultOutcome::Silent)), (4, 0.5));
        assert_eq!(data.bytes_at_risk, 10.0);
        assert_eq!(summary.rows[1].share(FaultOutcome::Crash), 1.0);
        assert_eq!(summary.rows[1].outcomes[&FaultOutcome::Masked], 0);
        let text = summary.to_text();
        assert!(
            text.contains(
                "bitflip        data           4     25%        0%       25%     50%      0%"
            ),
            "{text}"
        );
        let json = serde_json::to_string(&summary).unwrap();
        assert_eq!(
            serde_json::from_str::<FaultSummary>(&json).unwrap(),
            summary
        );
    }
}
