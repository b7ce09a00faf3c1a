//! XFS's log as a consistency mechanism, on hand-made traces of log records: a record's
//! body lines follow the cut while the rules hold and its header lines stay explored; a
//! block written in place before the record that logs it is durable (rule 1) and a record
//! written while one eight records back is not durable (rule 2) are each flagged, with
//! their witness, and stop the pruning; their correct twins are not flagged. Log lines
//! that no record header covers stay explored.

mod common;

use common::Seen;
use persim_model::{FailureKind, LogKind, Scope, XfsLogLayout};

/// The data device at PM 0; its log at 0x4000, 16 sectors.
fn layout() -> XfsLogLayout {
    XfsLogLayout {
        fs_start: 0,
        start: 0x4000,
        len: 0x2000,
    }
}

/// A record at log sector 0: header (magic, cycle 1, version 2, a 1 KiB body, the saved
/// first words of the two body sectors, h_size 32 KiB), then its body, each sector's first
/// word stamped with the cycle: an empty region up to the second sector, whose stamped
/// word is the length of the op that holds a buffer item logging the 8 sectors at
/// 512-byte block 0x30 (PM 0x6000), and its data region; the last store completes it.
const HEADER: &str = "ntwrite 0x4000 feedbabe000000010000000200000400\n\
     ntwrite 0x4010 0000000100000000\n\
     ntwrite 0x402c deadbeef00000010\n\
     ntwrite 0x4140 00008000\n";
const BODY: &str = "ntwrite 0x4200 00000001000001f069000000\n\
     ntwrite 0x43fc deadbeef0000000169000000\n\
     ntwrite 0x4408 3c120200000008003000000000000000\n\
     ntwrite 0x4418 deadbeef0000001069000000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n\
     ntwrite 0x45f8 0000000000000000\n";
/// The logged block written in place.
const IN_PLACE: &str = "write 0x6000 bbbbbbbbbbbbbbbb\n";

fn replay(body: &str, scope: Scope) -> Seen {
    common::replay_logged(body, 0x10000, scope, LogKind::Xfs, |config| {
        config.xfs_log = Some(layout());
    })
}

#[test]
fn a_durable_record_before_its_in_place_write_breaks_no_rule_and_its_body_follows_the_cut() {
    let body = format!("{HEADER}{BODY}fence sfence\n{IN_PLACE}");
    let seen = replay(&body, Scope::Program);
    assert_eq!(seen.kinds(), [FailureKind::Fence, FailureKind::Checkpoint]);
    assert!(seen.rules().is_empty(), "no rule broken");
    // at the fence: the body's four lines follow the cut, the header's two are explored
    assert_eq!(seen.0[0].1, [0x4200, 0x43c0, 0x4400, 0x45c0]);
    let all = replay(&body, Scope::All);
    seen.prunes_against(&all, 0);
    // the in-place line is not the log's: explored
    assert!(seen.0[1].1.is_empty());
}

#[test]
fn an_in_place_write_before_its_record_is_durable_breaks_rule_1() {
    let body = format!("{HEADER}{BODY}{IN_PLACE}fence sfence\n");
    let seen = replay(&body, Scope::Program);
    assert_eq!(seen.rules(), [1]);
    assert!(
        seen.0.iter().all(|p| p.1.is_empty()),
        "nothing pruned after a broken rule"
    );
    // a block the record does not log may be written before it is durable
    let elsewhere = format!("{HEADER}{BODY}write 0x7000 bb\nfence sfence\n");
    assert!(replay(&elsewhere, Scope::Program).rules().is_empty());
}

/// A header-only record at log sector `sector` (its lsn's block), cached or NT.
fn empty_record(sector: u64, op: &str) -> String {
    let at = 0x4000 + sector * 0x200;
    format!(
        "{op} {at:#x} feedbabe000000010000000200000000\n\
         {op} {:#x} 00000001{sector:08x}\n\
         {op} {:#x} 00008000\n",
        at + 0x10,
        at + 0x140
    )
}

#[test]
fn a_record_written_while_one_eight_back_is_not_durable_breaks_rule_2() {
    // record 0 is cached and never flushed: fences do not make it durable
    let mut body = empty_record(0, "write");
    for sector in 1..=8 {
        body.push_str(&empty_record(sector, "ntwrite"));
        body.push_str("fence sfence\n");
    }
    let seen = replay(&body, Scope::Program);
    assert_eq!(seen.rules(), [2], "flagged once, at the ninth record");
    // seven records later, record 0 is still where recovery checks CRCs
    let mut within = empty_record(0, "write");
    for sector in 1..=7 {
        within.push_str(&empty_record(sector, "ntwrite"));
        within.push_str("fence sfence\n");
    }
    assert!(replay(&within, Scope::Program).rules().is_empty());
    // its twin flushes record 0 first
    let mut twin = empty_record(0, "write");
    twin.push_str("flush clwb 0x4000\nflush clwb 0x4140\nfence sfence\n");
    for sector in 1..=8 {
        twin.push_str(&empty_record(sector, "ntwrite"));
        twin.push_str("fence sfence\n");
    }
    assert!(replay(&twin, Scope::Program).rules().is_empty());
}

#[test]
fn a_log_sector_no_record_covers_is_explored() {
    // the record covers sectors 0 to 2; sector 5 is written without a header
    let body = format!("{HEADER}{BODY}ntwrite 0x4a00 cccccccccccccccc\nfence sfence\n");
    let seen = replay(&body, Scope::Program);
    assert!(seen.rules().is_empty());
    assert_eq!(seen.0[0].1, [0x4200, 0x43c0, 0x4400, 0x45c0]);
}
