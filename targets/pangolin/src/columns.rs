//! Locks on a pool's parity page columns, the hybrid scheme of overlapping parity updates.
//!
//! A commit holds each column it XORs into from writing its data back until its parity
//! is updated: shared for a small change, XORed into the parity words atomically, so that
//! threads whose objects share the column proceed together; exclusive for a large one
//! (at least [`EXCLUSIVE_BYTES`]), XORed with plain loads and stores, where one lock costs
//! less than that many atomic operations. A repair holds its zone's columns exclusive, so
//! it never sees data whose parity is still on its way. Locks are taken in ascending
//! order and held only inside the pool's code: no deadlock.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::layout::{Geometry, PAGE};

/// Bytes of one commit's change to one column from which it takes the column exclusive:
/// 64 atomic XORs (about 20 cycles each) cost more than the lock's two atomic operations
/// and a plain XOR, and a change this large is rarely one other threads wait on.
pub const EXCLUSIVE_BYTES: usize = 512;

const EXCLUSIVE: u32 = u32::MAX;

/// A lock per page column of every zone: holders shared, or [`EXCLUSIVE`].
pub struct Columns {
    locks: Vec<AtomicU32>,
    per_zone: usize,
}

impl Columns {
    pub fn new(geometry: &Geometry) -> Self {
        let per_zone = (geometry.chunk_size / PAGE) as usize;
        Columns {
            locks: (0..per_zone * geometry.zone_count())
                .map(|_| AtomicU32::new(0))
                .collect(),
            per_zone,
        }
    }

    /// The column holding parity byte `at` of zone `zone` (whose parity row starts at
    /// `parity_base`).
    pub fn id(&self, zone: usize, parity_base: u64, at: u64) -> usize {
        zone * self.per_zone + ((at - parity_base) / PAGE) as usize
    }

    /// The columns of zone `zone`.
    pub fn of_zone(&self, zone: usize) -> std::ops::Range<usize> {
        zone * self.per_zone..(zone + 1) * self.per_zone
    }

    pub fn lock(&self, id: usize, exclusive: bool) {
        let lock = &self.locks[id];
        let mut spins = 0u32;
        loop {
            let held = lock.load(Ordering::Relaxed);
            let next = match (exclusive, held) {
                (true, 0) => Some(EXCLUSIVE),
                (false, h) if h < EXCLUSIVE - 1 => Some(h + 1),
                _ => None,
            };
            if let Some(next) = next {
                if lock
                    .compare_exchange_weak(held, next, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
            }
            // Holders hold for a commit's write-back: spin a little, then let them run.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    pub fn unlock(&self, id: usize, exclusive: bool) {
        if exclusive {
            self.locks[id].store(0, Ordering::Release);
        } else {
            self.locks[id].fetch_sub(1, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_holders_add_up_and_exclusive_waits_for_none() {
        let columns = Columns::new(&Geometry::new(64 << 20));
        columns.lock(3, false);
        columns.lock(3, false);
        assert_eq!(columns.locks[3].load(Ordering::Relaxed), 2);
        columns.unlock(3, false);
        columns.unlock(3, false);
        columns.lock(3, true);
        assert_eq!(columns.locks[3].load(Ordering::Relaxed), EXCLUSIVE);
        columns.unlock(3, true);
        assert_eq!(columns.locks[3].load(Ordering::Relaxed), 0);
    }
}
