//! dm-writecache's metadata as a consistency mechanism, on hand-made traces: data of a
//! block no crash image commits follows the cut while the rules hold, the entries and the
//! superblock stay explored; a superblock count moved over blocks not yet durable (rule 1)
//! and a committed block written in place (rule 2) are each flagged, with their witness,
//! and stop the pruning; their correct twins are not flagged.

mod common;

use common::Seen;
use persim_model::{FailureKind, LogKind, Scope, WritecacheLayout};

/// The superblock at 0x1000 (its count at 0x1018), four entries of 16 bytes from 0x1040
/// (block b's count at 0x1048 + 16 b), 512-byte blocks from 0x2000; count 5, and the
/// entries' counts as the initial image holds them.
fn layout(entries: [u64; 4]) -> WritecacheLayout {
    WritecacheLayout {
        start: 0x1000,
        block_size: 512,
        data: 0x1000,
        seq: 5,
        entries: entries.to_vec(),
    }
}

const FREE: [u64; 4] = [u64::MAX; 4];
/// Block 0 written as dm-writecache writes one: its entry (origin sector 8, count 5), then
/// its data by cached stores and `clflushopt`.
const WRITE: &str = "ntwrite 0x1040 08000000000000000500000000000000\n\
     write 0x2000 aaaaaaaaaaaaaaaa\nwrite 0x2040 aaaaaaaaaaaaaaaa\nwrite 0x2100 aaaaaaaaaaaaaaaa\n\
     flush clflushopt 0x2000\nflush clflushopt 0x2040\nflush clflushopt 0x2100\n";
const DATA_LINES: [u64; 3] = [0x2000, 0x2040, 0x2100];
/// The superblock's count moved to 6: block 0 committed.
const COMMIT: &str = "ntwrite 0x1018 0600000000000000\n";

fn replay(body: &str, entries: [u64; 4], scope: Scope) -> Seen {
    common::replay_logged(body, 0x10000, scope, LogKind::Writecache, |config| {
        config.writecache = Some(layout(entries));
    })
}

#[test]
fn a_block_durable_before_its_commit_breaks_no_rule_and_its_data_follows_the_cut() {
    let body = format!("{WRITE}fence sfence\n{COMMIT}fence sfence\n");
    let seen = replay(&body, FREE, Scope::Program);
    // at the first fence the data follows the cut, the entry's line is explored; at the
    // second the superblock's line is
    seen.commits_with_protected(&replay(&body, FREE, Scope::All), &DATA_LINES);
}

#[test]
fn a_commit_over_a_block_not_yet_durable_breaks_rule_1() {
    // the fence before the commit is missing
    let body = format!("{WRITE}{COMMIT}fence sfence\n");
    let seen = replay(&body, FREE, Scope::Program);
    assert_eq!(seen.rules(), [1]);
    assert_eq!(seen.2[0].lines, [0x1040, 0x2000, 0x2040, 0x2100]);
    assert!(seen.2[0].describe().contains("dm-writecache rule 1"));
    assert!(
        seen.0.iter().all(|p| p.1.is_empty()),
        "nothing pruned after a broken rule"
    );
}

#[test]
fn a_committed_block_written_in_place_breaks_rule_2() {
    let body = format!("{WRITE}fence sfence\n{COMMIT}fence sfence\nwrite 0x2040 bb\n");
    let seen = replay(&body, FREE, Scope::Program);
    assert_eq!(seen.rules(), [2]);
    assert_eq!(
        (seen.2[0].lines.clone(), seen.2[0].sequence),
        (vec![0x2040], 0)
    );
    // its twin writes the new data to a free block (1) under a new entry
    let twin = format!(
        "{WRITE}fence sfence\n{COMMIT}fence sfence\n\
         ntwrite 0x1050 08000000000000000600000000000000\nwrite 0x2240 bb\n"
    );
    assert!(replay(&twin, FREE, Scope::Program).rules().is_empty());
}

#[test]
fn data_of_a_block_a_durable_entry_may_still_commit_is_explored() {
    // block 1 is committed (count 3) in the initial image: freed (count -1), its new data
    // is not past every count a crash image holds until the free is durable
    let free = "ntwrite 0x1058 ffffffffffffffff\n";
    let data = "write 0x2200 cc\nflush clwb 0x2200\n";
    let body = format!("{free}{data}fence sfence\n{data}fence sfence\n");
    let seen = replay(&body, [u64::MAX, 3, u64::MAX, u64::MAX], Scope::Program);
    assert!(seen.rules().is_empty());
    let fences: Vec<&Vec<u64>> = seen
        .0
        .iter()
        .filter(|p| p.0 == FailureKind::Fence)
        .map(|p| &p.1)
        .collect();
    assert!(fences[0].is_empty(), "the committed count may survive");
    assert_eq!(*fences[1], [0x2200]);
}
