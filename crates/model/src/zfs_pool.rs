//! An OpenZFS pool on the block device as a consistency mechanism (docs/design/model.md,
//! "OpenZFS transaction groups"): copy-on-write blocks that only a new uberblock makes
//! reachable, so pending block writes no uberblock can reference yet follow the cut.
//!
//! A transaction group writes its new blocks where nothing the newest durable uberblock
//! references lies (copy-on-write, trusted), flushes them, and only then writes the
//! uberblocks and labels that make them reachable. Import reads the newest valid
//! uberblock's tree and nothing else, so while no label write is pending the pending block
//! writes change no recovered state: lost or durable, the images recover alike.
//!
//! The rule checked: no label (uberblock or configuration) is written while a block of
//! the pool outside the labels is pending. A violation is recorded with its witness, and
//! from then on nothing is pruned. Log blocks of an intent log inside the pool (an
//! embedded checksum's magic where a log block keeps it, in any sector) are reachable
//! through the log's chain without a new uberblock: while one is pending nothing follows.

use crate::jbd2::{JournalViolation, LogKind};
use crate::rule_log::RuleLog;

/// Bytes of one vdev label: padding, boot block, configuration, uberblock ring.
pub const ZFS_LABEL_SIZE: u64 = 256 << 10;
/// The magic of an embedded checksum (`zio_eck_t`), as OpenZFS stores it (little endian).
pub const ZFS_ECK_MAGIC: u64 = 0x0210_da7a_b10c_7a11;
/// Bytes of an embedded checksum: the magic and a 256-bit checksum.
const ECK_SIZE: usize = 40;
const SECTOR: usize = 512;
/// Where a ZIL block (format 2, `zil_chain_t` first) keeps its embedded checksum.
const ZIL_CHAIN_ECK_AT: usize = 8 + 128 + 8;

/// Where a pool's vdev labels lie on the block device (`persim_image::zfs_layout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZfsLayout {
    /// Byte offsets of the labels found in the initial image, ascending.
    pub labels: Vec<u64>,
}

impl ZfsLayout {
    fn in_label(&self, offset: u64, len: u64) -> bool {
        self.labels
            .iter()
            .any(|&l| offset < l + ZFS_LABEL_SIZE && l < offset + len)
    }
}

/// Whether `data`, written to the pool, holds a ZIL block: an embedded checksum's magic
/// after the chain header (format 2) or at the end (format 1) of one of its 512-byte
/// sectors, since the vdev queue may join a log block with its neighbours in one write.
fn holds_log_block(data: &[u8]) -> bool {
    let magic_at = |at: usize| {
        data.get(at..at + 8).is_some_and(|w| {
            u64::from_le_bytes(w.try_into().expect("eight bytes")) == ZFS_ECK_MAGIC
        })
    };
    (0..data.len())
        .step_by(SECTOR)
        .any(|s| magic_at(s + ZIL_CHAIN_ECK_AT) || magic_at(s + SECTOR - ECK_SIZE))
}

/// Follows one pool's block writes through a replay.
#[derive(Debug)]
pub struct ZfsPool {
    layout: ZfsLayout,
    /// Byte offsets of the pending block writes outside the labels.
    pending_blocks: Vec<u64>,
    /// A label write or a log block is pending: what is pending may be read at import.
    reachable: bool,
    rules: RuleLog,
}

impl ZfsPool {
    pub fn new(layout: ZfsLayout) -> ZfsPool {
        ZfsPool {
            layout,
            pending_blocks: Vec::new(),
            reachable: false,
            rules: RuleLog::new(LogKind::Zfs),
        }
    }

    pub fn holds_so_far(&self) -> bool {
        self.rules.holds()
    }

    pub fn take_violations(&mut self) -> Vec<JournalViolation> {
        self.rules.take()
    }

    /// A block write of `data` at byte `offset` of the block device by entry `entry`.
    pub fn blk_write(&mut self, offset: u64, data: &[u8], entry: u64) {
        if self.layout.in_label(offset, data.len() as u64) {
            if !self.pending_blocks.is_empty() {
                let witness = std::iter::once(offset)
                    .chain(self.pending_blocks.iter().copied())
                    .collect();
                self.rules.broke(entry, 1, 0, witness);
            }
            self.reachable = true;
        } else {
            self.reachable |= holds_log_block(data);
            self.pending_blocks.push(offset);
        }
    }

    /// A block flush: everything pending is durable.
    pub fn blk_flushed(&mut self) {
        self.pending_blocks.clear();
        self.reachable = false;
    }

    /// Whether no recovery reads what is pending on the block device: the rule has held,
    /// and neither a label nor a log block is pending.
    pub fn pending_unreachable(&self) -> bool {
        self.rules.holds() && !self.reachable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> ZfsPool {
        ZfsPool::new(ZfsLayout {
            labels: vec![16 << 10, 272 << 10],
        })
    }

    #[test]
    fn tree_writes_flushed_before_the_uberblock_follow_the_cut() {
        let mut p = pool();
        p.blk_write(8 << 20, &[0; 4096], 1);
        assert!(p.pending_unreachable());
        p.blk_flushed();
        p.blk_write((16 << 10) + (128 << 10), &[0; 4096], 3);
        assert!(!p.pending_unreachable(), "an uberblock is pending");
        p.blk_flushed();
        p.blk_write(9 << 20, &[0; 4096], 5);
        assert!(p.pending_unreachable());
        assert!(p.take_violations().is_empty());
    }

    #[test]
    fn an_uberblock_written_over_pending_tree_writes_breaks_the_rule() {
        let mut p = pool();
        p.blk_write(8 << 20, &[0; 4096], 1);
        p.blk_write((272 << 10) + (130 << 10), &[0; 4096], 2);
        let v = p.take_violations();
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].log, v[0].entry, v[0].rule), (LogKind::Zfs, 2, 1));
        assert_eq!(v[0].lines, vec![(272 << 10) + (130 << 10), 8 << 20]);
        p.blk_flushed();
        p.blk_write(9 << 20, &[0; 4096], 4);
        assert!(!p.pending_unreachable(), "a broken rule ends the pruning");
    }

    #[test]
    fn a_pending_log_block_is_reachable_also_joined_with_other_blocks() {
        for at in [ZIL_CHAIN_ECK_AT, SECTOR - ECK_SIZE, 8192 + ZIL_CHAIN_ECK_AT] {
            let mut blocks = vec![0; 16384];
            blocks[at..at + 8].copy_from_slice(&ZFS_ECK_MAGIC.to_le_bytes());
            let mut p = pool();
            p.blk_write(8 << 20, &blocks, 1);
            assert!(!p.pending_unreachable(), "magic at {at}");
        }
        let mut p = pool();
        p.blk_write(8 << 20, &[0x11; 16384], 1);
        assert!(p.pending_unreachable(), "no magic");
    }
}
