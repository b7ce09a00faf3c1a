//! An OpenZFS pool's transaction groups on the block device as a consistency mechanism,
//! on hand-made traces: block writes pending while no label is pending are unreachable
//! and stay lost under `Scope::Program`; a pending uberblock keeps the block side
//! explored; an uberblock written over pending blocks (no flush between) is flagged with
//! its witness and ends the pruning, its flushed twin is not.

mod common;

use common::Seen;
use persim_model::{FailureKind, LogKind, Scope, ZfsLayout};

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
