//! libpmemobj's lane logs as a consistency mechanism, on hand-made traces of one lane's
//! ulogs: an in-place store to a range whose undo snapshot is not yet durable (rule 1),
//! and a redo log applied before its entries and checksum are durable (rule 2), are each
//! flagged with their witness; their correct twins, and stores the logs do not name, are
//! not. While the rules hold, a line whose pending stores all lie in ranges recovery
//! rewrites from a durable log follows the cut; a line partly outside them, one covered by
//! an and/or entry or a log not yet durable stays explored, and so does everything once a
//! rule is broken.

mod common;

use common::Seen;
use persim_model::{FailureKind, LogKind, PmemobjLayout, Scope};

/// A pool at PM 0x10000 whose two lanes start at pool offset 0x2000: lane 0's external
/// redo log at 0x12100 (entries from 0x12140), its undo log at 0x123c0 (from 0x12400).
fn layout() -> PmemobjLayout {
    PmemobjLayout {
        pool: 0x10000,
        lanes: 0x12000,
        nlanes: 2,
    }
}

/// An undo entry (a buffer copy, 0b110 in the top bits) snapshotting the 8 bytes at pool
/// offset 0x20000 (PM 0x30000): offset, checksum, size, the old bytes.
const UNDO_ENTRY: &str = concat!(
    "write 0x12400 00000200000000c0111111111111111108000000000000",
    "00aaaaaaaaaaaaaaaa\n"
);
const UNDO_DURABLE: &str = "flush clwb 0x12400\nfence sfence\n";
/// The snapshotted range written in place, and made durable.
const IN_PLACE: &str = "write 0x30000 bbbbbbbbbbbbbbbb\nflush clwb 0x30000\nfence sfence\n";
/// The undo log's generation number bumped (a transaction's end), durable.
const COMMIT: &str = "write 0x123d8 0100000000000000\nflush clwb 0x123c0\nfence sfence\n";
/// Redo entries setting the words at pool offsets 0x20000 and 0x20010, and the log's
/// checksum.
const REDO_ENTRIES: &str = concat!(
    "write 0x12140 0000020000000000bbbbbbbbbbbbbbbb",
    "1000020000000000bbbbbbbbbbbbbbbb\n"
);
const REDO_CHECKSUM: &str = "write 0x12100 2222222222222222\n";
const REDO_DURABLE: &str = "flush clwb 0x12100\nflush clwb 0x12140\nfence sfence\n";
/// The log cleared once applied: its checksum zeroed.
const REDO_CLOBBER: &str = "write 0x12100 0000000000000000\nflush clwb 0x12100\nfence sfence\n";

fn replay_in(body: &str, scope: Scope) -> Seen {
    let seen = common::replay_logged(body, 0x40000, scope, LogKind::Pmemobj, |config| {
        config.pmemobj = Some(layout());
    });
    if !seen.2.is_empty() {
        assert!(
            seen.0.iter().all(|p| p.1.is_empty()),
            "nothing pruned where a rule is broken"
        );
    }
    seen
}

fn replay(body: &str) -> Seen {
    replay_in(body, Scope::Program)
}

/// The lines that follow the cut at each failure point.
fn protected(seen: &Seen) -> Vec<Vec<u64>> {
    seen.0.iter().map(|p| p.1.clone()).collect()
}

#[test]
fn a_snapshot_durable_before_its_range_is_written_breaks_no_rule() {
    let seen = replay(&format!("{UNDO_ENTRY}{UNDO_DURABLE}{IN_PLACE}"));
    assert!(seen.rules().is_empty());
}

#[test]
fn a_range_written_before_its_snapshot_is_durable_breaks_rule_1_with_its_witness() {
    let seen = replay(&format!("{UNDO_ENTRY}{IN_PLACE}"));
    assert_eq!(seen.rules(), [1]);
    let violation = &seen.2[0];
    assert_eq!((violation.entry, violation.sequence), (1, 0));
    // the line written in place, then the entry's line still pending
    assert_eq!(violation.lines, [0x30000, 0x12400]);
    assert!(
        violation.describe().contains("undo log"),
        "{}",
        violation.describe()
    );
    // a range the entry does not snapshot may be written meanwhile
    let elsewhere = "write 0x30008 bbbbbbbbbbbbbbbb\nflush clwb 0x30000\nfence sfence\n";
    assert!(replay(&format!("{UNDO_ENTRY}{elsewhere}"))
        .rules()
        .is_empty());
}

#[test]
fn a_rule_is_reported_once_per_generation() {
    // the range written twice before its snapshot is durable: one violation
    let body = format!("{UNDO_ENTRY}write 0x30000 cc\n{IN_PLACE}");
    assert_eq!(replay(&body).rules(), [1]);
    // the next transaction's snapshot of it, pending again: a second one
    let body = format!("{UNDO_ENTRY}{IN_PLACE}{COMMIT}{UNDO_ENTRY}{IN_PLACE}");
    assert_eq!(replay(&body).rules(), [1, 1]);
    // and its correct twin
    let body =
        format!("{UNDO_ENTRY}{UNDO_DURABLE}{IN_PLACE}{COMMIT}{UNDO_ENTRY}{UNDO_DURABLE}{IN_PLACE}");
    assert!(replay(&body).rules().is_empty());
}

#[test]
fn a_redo_log_durable_before_it_is_applied_breaks_no_rule() {
    let body = format!("{REDO_ENTRIES}{REDO_CHECKSUM}{REDO_DURABLE}{IN_PLACE}{REDO_CLOBBER}");
    assert!(replay(&body).rules().is_empty());
    // cleared, its entries are dead: a new log's first entry written over the first, the
    // second (naming PM 0x30010) is not the log's any more
    let next = "write 0x12140 2000020000000000cccccccccccccccc\n";
    let late = "write 0x30010 dd\nflush clwb 0x30000\nfence sfence\n";
    assert!(replay(&format!("{body}{next}{late}")).rules().is_empty());
}

#[test]
fn a_redo_log_applied_before_it_is_durable_breaks_rule_2() {
    let seen = replay(&format!("{REDO_ENTRIES}{REDO_CHECKSUM}{IN_PLACE}"));
    assert_eq!(seen.rules(), [2]);
    assert_eq!(seen.2[0].lines, [0x30000, 0x12100, 0x12140]);
    assert!(
        seen.2[0].describe().contains("redo log"),
        "{}",
        seen.2[0].describe()
    );
    // entries durable, but no checksum written: recovery would not apply the log
    let entries = format!("{REDO_ENTRIES}flush clwb 0x12140\nfence sfence\n");
    let seen = replay(&format!("{entries}{IN_PLACE}"));
    assert_eq!(seen.2[0].lines, [0x30000, 0x12100]);
    // the checksum written but not durable
    let seen = replay(&format!("{entries}{REDO_CHECKSUM}{IN_PLACE}"));
    assert_eq!(seen.2[0].lines, [0x30000, 0x12100]);
}

#[test]
fn stores_outside_the_lanes_and_the_named_ranges_are_not_checked() {
    // a pending entry in lane 1's undo log (from 0x13000) naming pool offset 0x28000, a
    // range it does not name written in place, and a store past the last lane
    let lane1 = concat!(
        "write 0x13000 00800200000000c0111111111111111108000000000000",
        "00aaaaaaaaaaaaaaaa\n"
    );
    let body = format!("{lane1}write 0x13800 cc\n{IN_PLACE}");
    assert!(replay(&body).rules().is_empty());
    // the range it names is checked
    let seen = replay(&format!("{lane1}write 0x38000 cc\n"));
    assert_eq!((seen.rules(), seen.2[0].sequence), (vec![1], 1));
}

#[test]
fn a_range_a_durable_snapshot_restores_follows_the_cut() {
    // beside it, a line no log covers
    let body = format!("{UNDO_ENTRY}{UNDO_DURABLE}write 0x31000 cc\n{IN_PLACE}");
    let seen = replay(&body);
    assert_eq!(
        seen.kinds(),
        [
            FailureKind::Fence,
            FailureKind::Fence,
            FailureKind::Checkpoint
        ]
    );
    // at the first fence the entry is pending: explored; at the second the in-place line
    // is pending under a durable snapshot: it follows the cut
    assert_eq!(protected(&seen), [vec![], vec![0x30000], vec![]]);
    let all = replay_in(&body, Scope::All);
    seen.prunes_against(&all, 1);
    // a store partly outside the snapshot keeps its line explored
    let wider = "write 0x30000 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\nfence sfence\n";
    let seen = replay(&format!("{UNDO_ENTRY}{UNDO_DURABLE}{wider}"));
    assert_eq!(protected(&seen), [vec![], vec![], vec![]]);
    // committed (the generation bumped): the snapshot restores nothing any more
    let seen = replay(&format!("{UNDO_ENTRY}{UNDO_DURABLE}{COMMIT}{IN_PLACE}"));
    assert!(protected(&seen).iter().all(Vec::is_empty));
    // an entry before it still pending: recovery stops there and never reaches it
    let before = concat!(
        "write 0x12400 08000200000000c0111111111111111108000000000000",
        "00aaaaaaaaaaaaaaaa\n"
    );
    let after = concat!(
        "write 0x12440 00000200000000c0111111111111111108000000000000",
        "00aaaaaaaaaaaaaaaa\nflush clwb 0x12440\nfence sfence\n"
    );
    let seen = replay(&format!("{before}{after}{IN_PLACE}"));
    assert!(seen.rules().is_empty());
    assert_eq!(protected(&seen)[1], Vec::<u64>::new());
    // its twin makes the first entry durable too
    let seen = replay(&format!("{before}flush clwb 0x12400\n{after}{IN_PLACE}"));
    assert_eq!(protected(&seen)[1], [0x30000]);
}

#[test]
fn a_range_a_durable_redo_log_sets_follows_the_cut() {
    let body = format!("{REDO_ENTRIES}{REDO_CHECKSUM}{REDO_DURABLE}{IN_PLACE}{REDO_CLOBBER}");
    let seen = replay(&body);
    assert_eq!(protected(&seen)[1], [0x30000]);
    // an or entry: what recovery makes of the word depends on it
    let or = "write 0x12140 0000020000000040\n";
    let body = format!("{REDO_ENTRIES}{or}{REDO_CHECKSUM}{REDO_DURABLE}{IN_PLACE}");
    let seen = replay(&body);
    assert!(seen.rules().is_empty());
    assert!(protected(&seen).iter().all(Vec::is_empty));
}
