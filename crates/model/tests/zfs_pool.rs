//! An OpenZFS pool's transaction groups on the block device as a consistency mechanism,
//! on hand-made traces: block writes pending while no label is pending are unreachable
//! and stay lost under `Scope::Program`; a pending uberblock keeps the block side
//! explored; an uberblock written over pending blocks (no flush between) is flagged with
//! its witness and ends the pruning, its flushed twin is not. The ZIL's log blocks on PM:
//! a block's body follows the cut, its chain header stays explored.

mod common;

use common::Seen;
use persim_model::{FailureKind, LogKind, Scope, ZfsLayout, ZFS_ECK_MAGIC};

const PM: u64 = 0x1000;
/// The labels' places on the block device: a partition's first two.
const LABELS: [u64; 2] = [0x4000, 0x44000];
/// An uberblock slot of the first label.
const UBERBLOCK: u64 = 0x4000 + (128 << 10) + 0x1000;
const TREE_BLOCK: u64 = 0x80_0000;

fn replay(body: &str, scope: Scope) -> Seen {
    common::replay_logged(body, PM, scope, LogKind::Zfs, |config| {
        config.blk_size = 16 << 20;
        config.zfs = Some(ZfsLayout {
            labels: LABELS.to_vec(),
        });
    })
}

fn pm_line() -> String {
    "ntwrite 0x40 abababababababab\n".into()
}

fn blk(offset: u64) -> String {
    format!("blkwrite {offset:#x} {}\n", "cd".repeat(512))
}

/// Per failure point, how many images it made.
fn images(seen: &Seen) -> Vec<usize> {
    seen.0.iter().map(|p| p.3).collect()
}

#[test]
fn blocks_flushed_before_their_uberblock_stay_lost_while_no_label_is_pending() {
    let body = format!(
        "{}{}fence sfence\nblkflush\n{}{}fence sfence\nblkflush\n",
        pm_line(),
        blk(TREE_BLOCK),
        blk(UBERBLOCK),
        pm_line()
    );
    let (program, all) = (replay(&body, Scope::Program), replay(&body, Scope::All));
    use FailureKind::{Blkflush, Checkpoint, Fence};
    assert_eq!(
        program.kinds(),
        [Fence, Blkflush, Fence, Blkflush, Checkpoint]
    );
    assert!(program.rules().is_empty());
    // the tree block pending at the first fence: lost only (PM: nothing, everything)
    assert_eq!(images(&program), [2, 1, 4, 2, 1]);
    // the uberblock pending at the second fence is explored as `all` explores it
    assert_eq!(images(&all), [4, 2, 4, 2, 1]);
}

#[test]
fn an_uberblock_written_over_pending_blocks_breaks_the_rule_and_ends_the_pruning() {
    let body = format!(
        "{}{}fence sfence\n{}blkflush\n{}{}fence sfence\n",
        pm_line(),
        blk(TREE_BLOCK),
        blk(UBERBLOCK),
        blk(TREE_BLOCK + 0x1000),
        pm_line()
    );
    let seen = replay(&body, Scope::Program);
    assert_eq!(seen.rules(), [1]);
    assert_eq!(
        seen.2[0].lines,
        [UBERBLOCK, TREE_BLOCK],
        "the label write, then the pending block"
    );
    assert_eq!(seen.2[0].entry, 3);
    assert!(seen.2[0].describe().contains("ZFS rule broken at entry 3"));
    // before the violation the tree block stayed lost; after it, nothing is pruned
    assert_eq!(images(&seen), [2, 2, 4, 2]);
}

/// A ZIL log block at PM 0x400 using 392 bytes (4 KiB, past the PM's end here): its chain header (the used bytes at 136, the checksum's magic at 144), then
/// two body lines, all non-temporal, then a fence.
fn log_block() -> String {
    let mut text = format!("ntwrite 0x400 {}\n", "11".repeat(64));
    text += &format!("ntwrite 0x440 {}\n", "11".repeat(64));
    text += &format!("ntwrite 0x480 {}\n", "11".repeat(8));
    text += &format!("ntwrite 0x488 {}\n", hex(&392u64.to_le_bytes()));
    text += &format!("ntwrite 0x490 {}\n", hex(&ZFS_ECK_MAGIC.to_le_bytes()));
    text += &format!("ntwrite 0x498 {}\n", "ee".repeat(40));
    text += &format!("ntwrite 0x4c0 {}\n", "ab".repeat(64));
    text += &format!("ntwrite 0x500 {}\n", "ab".repeat(64));
    text + "fence sfence\n"
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_log_blocks_body_follows_the_cut_and_its_header_stays_explored() {
    let body = log_block();
    let (program, all) = (replay(&body, Scope::Program), replay(&body, Scope::All));
    assert_eq!(program.0[0].1, [0x4c0, 0x500], "the body's lines");
    assert!(program.rules().is_empty());
    program.prunes_against(&all, 0);
    // the header's tears remain: more than nothing and everything
    assert!(program.0[0].3 > 2, "{} images", program.0[0].3);
}
