//! The stock ZIL's log blocks on a PM separate log device (OpenZFS's `zfs-slog`
//! configuration) as a consistency mechanism (docs/design/model.md, "OpenZFS log blocks"):
//! a block's lines past its chain header follow the cut.
//!
//! A log block (format 2) starts with its chain header: padding, the next block's pointer,
//! the bytes used (`zc_nused`, at 136) and an embedded checksum (its magic at 144) over
//! the whole block, which is `zc_nused` rounded up to 4 KiB. Claim reads a block only
//! through the pointer in the block before it and drops it unless every byte matches the
//! checksum, so a block partly durable recovers as one absent: its body need not be
//! explored. The header's lines stay explored, so a torn header is still found. Nothing is
//! ordered inside a block, so no rule is checked; trusted: the checksum.
//!
//! Blocks are recognised from the stores (the pmem driver copies a block in ascending
//! order): the used bytes at a 512-byte boundary plus 136, then the magic 8 bytes later.

use crate::unit::LINE;
use crate::zfs_pool::ZFS_ECK_MAGIC;

const SECTOR: u64 = 512;
const NUSED_AT: u64 = 136;
const MAGIC_AT: u64 = 144;
/// The chain header's lines: through the embedded checksum (184 bytes).
const HEADER: u64 = 3 * LINE;
/// Writes are whole multiples of this (`ZIL_MIN_BLKSZ`).
const MIN_BLOCK: u64 = 4096;
/// The largest log block (`zil_maxblocksize`'s ceiling).
const MAX_BLOCK: u64 = 128 << 10;

/// Follows the log blocks written to PM through a replay.
#[derive(Debug, Default)]
pub struct ZilBlocks {
    /// The last `zc_nused` stored: (its block's start, the value).
    nused: Option<(u64, u64)>,
    /// Blocks whose header is stored: [start, end) of PM, the latest last.
    blocks: Vec<(u64, u64)>,
}

impl ZilBlocks {
    /// A store of `data` at `addr`.
    pub fn store(&mut self, addr: u64, data: &[u8]) {
        let first = addr.next_multiple_of(8);
        let words = data.get((first - addr) as usize..).unwrap_or_default();
        for (i, word) in words.chunks_exact(8).enumerate() {
            let at = first + 8 * i as u64;
            let value = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            match at % SECTOR {
                NUSED_AT => self.nused = Some((at - NUSED_AT, value)),
                MAGIC_AT if value == ZFS_ECK_MAGIC => self.header(at - MAGIC_AT),
                _ => {}
            }
        }
    }

    fn header(&mut self, start: u64) {
        let Some((_, used)) = self.nused.take().filter(|&(s, _)| s == start) else {
            return;
        };
        if !(HEADER..=MAX_BLOCK).contains(&used) {
            return;
        }
        let end = start + used.next_multiple_of(MIN_BLOCK);
        // a block over an older one's range ends that one where it begins
        for (s, e) in &mut self.blocks {
            if *s < start {
                *e = (*e).min(start);
            }
        }
        self.blocks.retain(|&(s, _)| s < start || s >= end);
        self.blocks.push((start, end));
    }

    /// Forgets blocks with no dirty line left (`dirty` says whether a line is).
    pub fn fenced(&mut self, dirty: impl Fn(u64) -> bool) {
        self.blocks
            .retain(|&(s, e)| (s..e).step_by(LINE as usize).any(&dirty));
    }

    /// Whether `line` lies in a log block's body.
    pub fn protects(&self, line: u64) -> bool {
        self.blocks
            .iter()
            .any(|&(s, e)| line >= s + HEADER && line < e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block's header at `start` using `used` bytes.
    fn header(blocks: &mut ZilBlocks, start: u64, used: u64) {
        blocks.store(start, &[0; 136]);
        blocks.store(start + NUSED_AT, &used.to_le_bytes());
        blocks.store(start + MAGIC_AT, &ZFS_ECK_MAGIC.to_le_bytes());
    }

    #[test]
    fn a_blocks_body_to_its_4_kib_end_is_protected_and_its_header_not() {
        let mut b = ZilBlocks::default();
        header(&mut b, 0x2000, 392);
        assert!(!b.protects(0x2080), "the header's last line");
        assert!(b.protects(0x20c0));
        assert!(b.protects(0x2fc0));
        assert!(!b.protects(0x3000));
        b.fenced(|_| false);
        assert!(!b.protects(0x20c0), "durable: forgotten");
    }

    #[test]
    fn a_magic_without_its_used_bytes_or_with_a_wrong_size_is_no_block() {
        let mut b = ZilBlocks::default();
        b.store(0x2000 + MAGIC_AT, &ZFS_ECK_MAGIC.to_le_bytes());
        header(&mut b, 0x4000, 0);
        header(&mut b, 0x6000, MAX_BLOCK + 1);
        assert!(!(0..0x40000).step_by(64).any(|l| b.protects(l)));
    }

    #[test]
    fn a_block_written_inside_an_older_one_cuts_it_short() {
        let mut b = ZilBlocks::default();
        header(&mut b, 0x2000, 8192);
        header(&mut b, 0x3000, 392);
        assert!(b.protects(0x2fc0));
        assert!(!b.protects(0x3040), "the new block's header");
        assert!(b.protects(0x30c0));
    }
}
