//! The pending state of the block device: per-block pending writes (docs/design/model.md).

use std::collections::BTreeMap;

/// Size of the block device's atomic unit.
pub const BLOCK: u64 = 512;

/// Block writes issued since the last block flush, per block, in issue order.
#[derive(Debug, Default)]
pub struct BlkPending {
    blocks: BTreeMap<u64, Vec<Box<[u8]>>>,
}

impl BlkPending {
    /// Records a write; `offset` and `data.len()` must be multiples of [`BLOCK`].
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        for (i, block) in data.chunks(BLOCK as usize).enumerate() {
            let number = offset / BLOCK + i as u64;
            self.blocks.entry(number).or_default().push(block.into());
        }
    }

    /// Makes every pending write durable; of several writes to one block the last one
    /// issued wins (our reading: a flush waits for all of them to complete, in order).
    pub fn flush(&mut self, mut persist: impl FnMut(u64, &[u8])) {
        for (number, writes) in std::mem::take(&mut self.blocks) {
            if let Some(last) = writes.last() {
                persist(number * BLOCK, last);
            }
        }
    }

    /// The blocks with pending writes, in block order: (byte offset, writes).
    pub fn pending(&self) -> Vec<(u64, &[Box<[u8]>])> {
        self.blocks
            .iter()
            .map(|(n, w)| (n * BLOCK, w.as_slice()))
            .collect()
    }
}
