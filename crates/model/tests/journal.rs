//! jbd2 as a consistency mechanism, on hand-made traces of one transaction: its journal
//! blocks before the commit and the in-place write after it follow the cut while the rules
//! hold; a commit written before the journal block is durable (rule 1) and an in-place
//! write before the commit is durable (rule 2) are each flagged, with the line that broke
//! the rule, and stop the pruning; their correct twin is not flagged. A block a revoke
//! record names is never pruned in place; the transaction's other blocks still are.

mod common;

use common::Seen;
use persim_model::{FailureKind, JournalExtent, JournalLayout, LogKind, Scope};

/// 1 KiB blocks; journal blocks 0..8 at PM 0x1000 (superblock, then the log), the file
/// system's block 20 at PM 0x5000.
fn layout() -> JournalLayout {
    JournalLayout {
        extents: vec![JournalExtent {
            logical: 0,
            start: 0x1000,
            blocks: 8,
        }],
        block_size: 0x400,
        fs_start: Some(0),
        tag_bytes: Some(16),
        revoke_bytes: 4,
        tail_sequence: 5,
        tail_block: 1,
        read_before_replay: Vec::new(),
    }
}

const DESCRIPTOR: &str = "ntwrite 0x1400 c03b399800000001\n\
     ntwrite 0x1408 00000005000000140000000a00000000\n";
const JOURNAL_COPY: &str = "ntwrite 0x1800 aaaaaaaaaaaaaaaa\n";
const COMMIT: &str = "ntwrite 0x1c00 c03b399800000002\nntwrite 0x1c08 0000000500000000\n";
const IN_PLACE: &str = "write 0x5000 bbbbbbbbbbbbbbbb\nwrite 0x5040 cccccccccccccccc\n";

/// What each failure point showed: its kind, the protected lines, the rules broken.
fn replay(body: &str, scope: Scope) -> Seen {
    replay_with(body, scope, layout())
}

fn replay_with(body: &str, scope: Scope, layout: JournalLayout) -> Seen {
    common::replay_logged(body, 0x8000, scope, LogKind::Jbd2, |config| {
        config.journal = Some(layout);
    })
}

fn correct() -> String {
    format!("{DESCRIPTOR}{JOURNAL_COPY}fence sfence\n{COMMIT}fence sfence\n{IN_PLACE}")
}

#[test]
fn a_correct_transaction_breaks_no_rule_and_its_protected_lines_follow_the_cut() {
    let seen = replay(&correct(), Scope::Program);
    assert_eq!(
        seen.kinds(),
        [
            FailureKind::Fence,
            FailureKind::Fence,
            FailureKind::Checkpoint
        ]
    );
    assert!(seen.0.iter().all(|p| p.2.is_empty()), "no rule broken");
    // before the commit: the descriptor and the journal copy, protected
    assert_eq!(seen.0[0].1, [0x1400, 0x1800]);
    assert_eq!(seen.0[0].3, 2, "nothing or everything");
    // the commit record's header line is explored
    assert!(seen.0[1].1.is_empty());
    // after it, the in-place write of block 20, which replay rewrites
    assert_eq!(seen.0[2].1, [0x5000, 0x5040]);
    assert_eq!(seen.0[2].3, 2);

    let all = replay(&correct(), Scope::All);
    assert!(all.0.iter().all(|p| p.1.is_empty()));
    assert!(all.0[0].3 > 2, "cuts through the journal blocks");
    assert_eq!(all.0[2].3, 4, "every subset of the two in-place lines");
}

#[test]
fn a_commit_before_its_journal_block_is_durable_breaks_rule_1() {
    let body = format!("{DESCRIPTOR}{JOURNAL_COPY}{COMMIT}fence sfence\n{IN_PLACE}");
    let seen = replay(&body, Scope::Program);
    let rules = seen.rules();
    assert_eq!(rules, [1]);
    assert!(
        seen.0.iter().all(|p| p.1.is_empty()),
        "nothing pruned after a broken rule"
    );
}

#[test]
fn an_in_place_write_before_the_commit_is_durable_breaks_rule_2() {
    let body = format!("{DESCRIPTOR}{JOURNAL_COPY}fence sfence\n{COMMIT}{IN_PLACE}fence sfence\n");
    let seen = replay(&body, Scope::Program);
    let rules = seen.rules();
    assert_eq!(rules, [2, 2]);
    assert!(seen.0.last().unwrap().1.is_empty());
}

#[test]
fn a_revoked_block_is_explored_in_place_and_the_others_still_follow_the_cut() {
    // Transaction 5 logs blocks 20 and 21 (journal blocks 2 and 3), revokes block 21
    // (journal block 4: 20 bytes used, one 4-byte record) and commits (journal block 5).
    let descriptor = "ntwrite 0x1400 c03b399800000001\n\
         ntwrite 0x1408 00000005000000140000000200000000\n\
         ntwrite 0x1418 0000000000000015000000080000000000000000\n";
    let copies = "ntwrite 0x1800 aaaaaaaaaaaaaaaa\nntwrite 0x1c00 aaaaaaaaaaaaaaaa\n";
    let revoke = "ntwrite 0x2000 c03b399800000005\nntwrite 0x2008 000000050000001400000015\n";
    let commit = "ntwrite 0x2400 c03b399800000002\nntwrite 0x2408 0000000500000000\n";
    let in_place = "write 0x5000 bbbbbbbbbbbbbbbb\nwrite 0x5400 cccccccccccccccc\n";
    let body =
        format!("{descriptor}{copies}{revoke}fence sfence\n{commit}fence sfence\n{in_place}");
    let seen = replay(&body, Scope::Program);
    assert!(seen.0.iter().all(|p| p.2.is_empty()), "no rule broken");
    let last = seen.0.last().unwrap();
    assert_eq!(
        last.1,
        [0x5000],
        "block 20 is replayed, block 21 may not be"
    );
    assert!(
        last.3 < 4,
        "not every subset of the two lines: {} images",
        last.3
    );
}

/// Mount checks the superblock's and group descriptors' checksums before it replays the
/// journal: a torn in-place write there fails the mount (ext4-DAX's touch and hello-world
/// under `--scope all`), so such lines are explored even when a durable transaction holds
/// their block; the block's other lines still follow the cut.
#[test]
fn in_place_lines_mount_reads_before_replay_are_explored() {
    let layout = JournalLayout {
        // part of block 20's first line, and a block the trace does not write
        read_before_replay: vec![0x5010..0x5020, 0x6000..0x6400],
        ..layout()
    };
    let seen = replay_with(&correct(), Scope::Program, layout);
    assert!(seen.0.iter().all(|p| p.2.is_empty()), "no rule broken");
    assert_eq!(
        seen.0[2].1,
        [0x5040],
        "the line mount reads first is explored"
    );
    assert_eq!(seen.0[2].3, 3, "nothing, 0x5000 alone, everything");
}
