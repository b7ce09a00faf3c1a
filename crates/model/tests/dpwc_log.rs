//! DPWC's log as a consistency mechanism, on hand-made traces: an entry's lines past every
//! `used` its chunk can hold follow the cut while the rules hold, the counter's line stays
//! explored; a `used` moved over entry lines not yet durable (rule 1) and a generation
//! opened before its reset counters are durable (rule 2) are each flagged, with their
//! witness, and stop the pruning; their correct twins are not flagged.

mod common;

use common::Seen;
use persim_model::{DpwcLayout, LogKind, Scope};

/// Two generations of two 8 KiB chunks: the table at 0x1000 (generation 0's word, then
/// chunk 0's and chunk 1's `used` at 0x1040 and 0x1080), chunk 0 at 0x2000; `used` as
/// the initial image holds it.
fn layout(used: [u64; 4]) -> DpwcLayout {
    DpwcLayout {
        start: 0,
        chunk_size: 0x2000,
        chunks_per_gen: 2,
        generations: 2,
        table: 0x1000,
        data: 0x2000,
        used: used.to_vec(),
    }
}

/// An entry at chunk 0's start: its header's first line, then 512 bytes of data after
/// the 256-byte header (8 lines).
fn entry() -> String {
    let mut text = String::from("ntwrite 0x2000 4450574500000000010000000000000000000000\n");
    for line in 0..8u64 {
        text.push_str(&format!(
            "ntwrite {:#x} {}\n",
            0x2100 + line * 64,
            "ab".repeat(64)
        ));
    }
    text
}

const ENTRY_LINES: [u64; 9] = [
    0x2000, 0x2100, 0x2140, 0x2180, 0x21c0, 0x2200, 0x2240, 0x2280, 0x22c0,
];
/// Chunk 0's `used` moved past the entry (0x300 bytes), with its CRC.
const COMMIT: &str = "ntwrite 0x1040 0003000012345678\n";

fn replay(body: &str, used: [u64; 4], scope: Scope) -> Seen {
    common::replay_logged(body, 0x10000, scope, LogKind::Dpwc, |config| {
        config.dpwc = Some(layout(used));
    })
}

#[test]
fn an_entry_durable_before_its_used_breaks_no_rule_and_follows_the_cut() {
    let body = format!("{}fence sfence\n{COMMIT}fence sfence\n", entry());
    let seen = replay(&body, [0; 4], Scope::Program);
    // at the first fence the entry's lines follow the cut; at the second, `used` is explored
    seen.commits_with_protected(&replay(&body, [0; 4], Scope::All), &ENTRY_LINES);
}

#[test]
fn a_used_moved_over_an_entry_not_yet_durable_breaks_rule_1() {
    let body = format!("{}{COMMIT}fence sfence\n", entry());
    let seen = replay(&body, [0; 4], Scope::Program);
    assert_eq!(seen.rules(), [1]);
    assert_eq!(
        seen.2[0].lines, ENTRY_LINES,
        "the witness: the entry's lines"
    );
    assert_eq!(seen.2[0].sequence, 0, "chunk 0");
    assert!(seen.2[0].describe().contains("DPWC log rule 1"));
    assert!(
        seen.0.iter().all(|p| p.1.is_empty()),
        "nothing pruned after a broken rule"
    );
}

#[test]
fn a_generation_opened_before_its_counters_are_reset_durably_breaks_rule_2() {
    let reset = "ntwrite 0x1040 0000000000000000\nntwrite 0x1080 0000000000000000\n";
    let open = "ntwrite 0x1000 0500000000001234\n";
    let seen = replay(
        &format!("{reset}{open}fence sfence\n"),
        [0; 4],
        Scope::Program,
    );
    assert_eq!(seen.rules(), [2]);
    assert_eq!(seen.2[0].lines, [0x1040, 0x1080]);
    // its twin fences the reset first
    let twin = format!("{reset}fence sfence\n{open}fence sfence\n");
    assert!(replay(&twin, [0; 4], Scope::Program).rules().is_empty());
    // freeing a generation (its word zeroed) is no opening
    let free = format!("{reset}ntwrite 0x1000 0000000000000000\nfence sfence\n");
    assert!(replay(&free, [0; 4], Scope::Program).rules().is_empty());
}

#[test]
fn entry_lines_a_durable_used_may_still_cover_are_explored() {
    // the chunk is full in the initial image: resetting its `used` takes a fence before
    // new entries in it are past every value a crash image can hold
    let reset = "ntwrite 0x1040 0000000000000000\n";
    let body = format!("{reset}{}fence sfence\n{}fence sfence\n", entry(), entry());
    let seen = replay(&body, [0x2000, 0, 0, 0], Scope::Program);
    assert!(seen.rules().is_empty());
    assert!(seen.0[0].1.is_empty(), "the old used covers them");
    assert_eq!(seen.0[1].1, ENTRY_LINES);
    // lines outside the chunks (the table) are never protected
    let table = replay("ntwrite 0x1100 00\nfence sfence\n", [0; 4], Scope::Program);
    assert!(table.0[0].1.is_empty());
}
