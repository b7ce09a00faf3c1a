//! ZIL-PMEM's log in OpenZFS as a consistency mechanism, on hand-made traces: an entry's
//! body and the end mark after it follow the cut until its header is stored, the header
//! stays explored; a header stored while its body is not durable is flagged with its
//! witness and stops the pruning, its fenced twin is not; a freed chunk's old entries keep
//! their lines explored until the free is durable.

mod common;

use common::Seen;
use persim_model::{LogKind, Scope, ZilPmemLayout};

/// Two chunks of 4 KiB after the superblock at 0: chunk 0 at 0x1000, chunk 1 at 0x2000;
/// `ends` where their walks stop in the initial image.
fn layout(ends: [u64; 2]) -> ZilPmemLayout {
    ZilPmemLayout {
        start: 0,
        chunk_size: 0x1000,
        ends: ends.to_vec(),
    }
}

fn replay(body: &str, ends: [u64; 2], scope: Scope) -> Seen {
    common::replay_logged(body, 0x4000, scope, LogKind::ZilPmem, |config| {
        config.zil_pmem = Some(layout(ends));
    })
}

/// A slot's first line with `length` in its length word (at 48).
fn slot_line(addr: u64, length: u64) -> String {
    let word = hex(&length.to_le_bytes());
    format!(
        "ntwrite {addr:#x} {}{word}{}\n",
        "11".repeat(48),
        "22".repeat(8)
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const END_WORD: u64 = u64::from_le_bytes(*b"ZILPMEND");

/// An entry of 0x200 bytes at chunk 0's start: its 256-byte body (four lines), then the end
/// mark in the slot after it.
fn body_and_end_mark() -> String {
    let mut text = String::new();
    for line in 0..4u64 {
        text.push_str(&format!(
            "ntwrite {:#x} {}\n",
            0x1100 + line * 64,
            "ab".repeat(64)
        ));
    }
    text + &slot_line(0x1200, END_WORD)
}

const BODY_LINES: [u64; 5] = [0x1100, 0x1140, 0x1180, 0x11c0, 0x1200];

#[test]
fn a_body_durable_before_its_header_breaks_no_rule_and_follows_the_cut() {
    let body = format!(
        "{}fence sfence\n{}fence sfence\n",
        body_and_end_mark(),
        slot_line(0x1000, 0x200)
    );
    let seen = replay(&body, [0; 2], Scope::Program);
    // before the header the body and end mark are unread; the header itself is explored
    seen.commits_with_protected(&replay(&body, [0; 2], Scope::All), &BODY_LINES);
}

#[test]
fn a_header_stored_before_its_body_is_durable_breaks_the_rule_with_its_witness() {
    let body = format!(
        "{}{}fence sfence\n",
        body_and_end_mark(),
        slot_line(0x1000, 0x200)
    );
    let seen = replay(&body, [0; 2], Scope::Program);
    assert_eq!(seen.rules(), [1]);
    assert_eq!(
        seen.2[0].lines, BODY_LINES,
        "the witness: body and end mark"
    );
    assert_eq!(seen.2[0].sequence, 0, "chunk 0");
    assert!(seen.2[0].describe().contains("ZIL-PMEM log rule"));
    assert!(
        seen.0.iter().all(|p| p.1.is_empty()),
        "nothing pruned after a broken rule"
    );
}

#[test]
fn lines_a_freed_chunk_walk_may_still_read_stay_explored_until_the_free_is_durable() {
    // chunk 0 holds entries up to 0x800; freeing it puts the end mark in its first slot
    let body = format!(
        "{}ntwrite 0x1300 00\nfence sfence\nntwrite 0x1340 00\nfence sfence\n",
        slot_line(0x1000, END_WORD)
    );
    let seen = replay(&body, [0x800, 0], Scope::Program);
    assert!(seen.rules().is_empty());
    assert!(seen.0[0].1.is_empty(), "the old entries' walk reads 0x1300");
    assert_eq!(seen.0[1].1, [0x1340]);
    // past the old walk's end, lines follow the cut at once
    let past = replay(
        "ntwrite 0x1900 00\nfence sfence\n",
        [0x800, 0],
        Scope::Program,
    );
    assert_eq!(past.0[0].1, [0x1900]);
}

#[test]
fn a_store_to_the_superblock_or_over_two_chunks_ends_the_pruning() {
    let alone = replay("ntwrite 0x1900 00\nfence sfence\n", [0; 2], Scope::Program);
    assert_eq!(alone.0[0].1, [0x1900]);
    for store in [
        "ntwrite 0x0 00",
        "ntwrite 0x1ff8 00000000000000000000000000000000",
    ] {
        let body = format!("{store}\nntwrite 0x1900 00\nfence sfence\n");
        let seen = replay(&body, [0; 2], Scope::Program);
        assert!(seen.0.iter().all(|p| p.1.is_empty()), "{store}");
    }
}
