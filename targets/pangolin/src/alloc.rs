//! Allocation state: each zone's bitmap object (an allocated bit and a first-unit bit per
//! 64-byte unit, side by side: bits 2k and 2k + 1 of byte u / 4 for unit u = 4·byte + k, so
//! that an allocation changes one byte, not one in each of two halves), mirrored in DRAM,
//! and a transaction's pending changes to it, which commit writes through the redo log
//! like any other object bytes.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// DRAM mirrors of the zones' bitmap objects, as on PM: read by every thread without a
/// lock, changed only by a commit holding [`Bitmaps::lock`].
#[derive(Debug, Default)]
pub struct Bitmaps {
    data: Vec<Box<[AtomicU8]>>,
    shared: Mutex<Shared>,
}

/// What the allocator's lock guards: checksums, search cursors and reservations.
#[derive(Debug, Default)]
pub struct Shared {
    pub sums: Vec<u32>,
    /// Where each zone's next search starts (volatile).
    cursors: Vec<u64>,
    /// Per zone, the allocated bits of units that open transactions allocated, so that
    /// no other transaction takes them before they commit (bitmap layout).
    reserved: Vec<Vec<u8>>,
}

/// A transaction's changes to the bitmaps, (zone, byte), the bits set and which bits
/// change, in the order first changed: a transaction changes a few bytes, so a vector
/// searched from the end beats a map. Only the changed bits are kept, so that commits of
/// transactions that interleaved keep each other's bits in a shared byte.
#[derive(Debug, Default)]
pub struct Overlay {
    changes: Vec<((usize, u64), u8, u8)>,
    /// Runs this transaction allocated (zone, unit, units): reserved until it ends.
    allocated: Vec<(usize, u64, u64)>,
}

impl Overlay {
    pub const fn new() -> Self {
        Overlay {
            changes: Vec::new(),
            allocated: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    fn get(&self, key: (usize, u64)) -> Option<(u8, u8)> {
        self.changes
            .iter()
            .rev()
            .find(|(k, ..)| *k == key)
            .map(|&(_, v, m)| (v, m))
    }

    fn insert(&mut self, key: (usize, u64), value: u8, mask: u8) {
        match self.changes.iter_mut().rev().find(|(k, ..)| *k == key) {
            Some((_, v, m)) => (*v, *m) = (rebase(*v, value, mask), *m | mask),
            None => self.changes.push((key, value, mask)),
        }
    }

    /// Forgets the changes, keeping the room they took (after [`Bitmaps::release`]).
    pub fn clear(&mut self) {
        self.changes.clear();
        self.allocated.clear();
    }
}

/// `committed` with the bits of `mask` taken from `value`.
fn rebase(committed: u8, value: u8, mask: u8) -> u8 {
    committed & !mask | value & mask
}

impl Bitmaps {
    pub fn push(&mut self, data: Vec<u8>, sum: u32) {
        let shared = self.shared.get_mut().expect("not poisoned");
        shared.reserved.push(vec![0; data.len()]);
        shared.sums.push(sum);
        shared.cursors.push(0);
        self.data
            .push(data.into_iter().map(AtomicU8::new).collect());
    }

    /// The allocator's lock: taken to search and reserve, and by a commit that changes
    /// bitmaps from gathering them to applying them, so such commits take turns.
    pub fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Byte `index` of zone `zone`'s bitmap, as committed.
    #[inline]
    pub fn committed(&self, zone: usize, index: u64) -> u8 {
        self.data[zone][index as usize].load(Ordering::Relaxed)
    }

    /// Zone `zone`'s bitmap bytes, as committed.
    pub fn bytes(&self, zone: usize) -> Vec<u8> {
        self.data[zone]
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    fn byte(&self, overlay: &Overlay, zone: usize, index: u64) -> u8 {
        let committed = self.committed(zone, index);
        // Reads outside a transaction pass an empty overlay: skip the search.
        if overlay.is_empty() {
            return committed;
        }
        overlay
            .get((zone, index))
            .map_or(committed, |(v, m)| rebase(committed, v, m))
    }

    fn bit(&self, overlay: &Overlay, zone: usize, unit: u64, first: bool) -> bool {
        let (index, mask) = place(unit, first);
        self.byte(overlay, zone, index) & mask != 0
    }

    fn set(&self, overlay: &mut Overlay, zone: usize, unit: u64, first: bool, value: bool) {
        let (index, mask) = place(unit, first);
        overlay.insert((zone, index), if value { mask } else { 0 }, mask);
    }

    #[inline]
    pub fn is_object(&self, overlay: &Overlay, zone: usize, unit: u64) -> bool {
        if overlay.is_empty() {
            return self.is_committed_object(zone, unit);
        }
        // Both bits from one byte, looked up once.
        let both = 3 << (2 * (unit % 4));
        self.byte(overlay, zone, unit / 4) & both == both
    }

    /// Whether a committed object starts at `unit`: its two bits read in place (every
    /// direct read asks).
    #[inline]
    pub fn is_committed_object(&self, zone: usize, unit: u64) -> bool {
        let both = 3 << (2 * (unit % 4));
        self.data[zone]
            .get((unit / 4) as usize)
            .is_some_and(|b| b.load(Ordering::Relaxed) & both == both)
    }

    /// Units of the object starting at `unit`: up to the next free or first unit.
    pub fn extent(&self, overlay: &Overlay, zone: usize, unit: u64, units: u64) -> u64 {
        1 + (unit + 1..units)
            .take_while(|&u| self.bit(overlay, zone, u, false) && !self.bit(overlay, zone, u, true))
            .count() as u64
    }

    /// Whether the committed object at `unit` spans at least `count` units.
    pub fn spans(&self, zone: usize, unit: u64, count: u64) -> bool {
        let data = &self.data[zone];
        (unit + 1..unit + count).all(|u| {
            // Allocated, not first.
            let b = data
                .get((u / 4) as usize)
                .map_or(0, |b| b.load(Ordering::Relaxed) >> (2 * (u % 4)) & 3);
            b == 1
        })
    }

    /// Marks `count` units from `unit` as one object (or frees them).
    pub fn mark(&self, overlay: &mut Overlay, zone: usize, unit: u64, count: u64, allocated: bool) {
        self.set(overlay, zone, unit, true, allocated);
        for u in unit..unit + count {
            self.set(overlay, zone, u, false, allocated);
        }
    }

    /// Finds a run of `count` free units in `zone` (of `units`), from the zone's cursor,
    /// none of them reserved by another transaction, and reserves it for `overlay`'s.
    pub fn reserve(
        &self,
        shared: &mut Shared,
        overlay: &mut Overlay,
        zone: usize,
        units: u64,
        count: u64,
    ) -> Option<u64> {
        let start = shared.cursors[zone];
        let reserved = &mut shared.reserved[zone];
        let mut run = 0;
        // Two passes from the cursor, so a run wrapping the zone's end is found from 0.
        for u in (start..units).chain(0..units) {
            if u == 0 {
                run = 0;
            }
            let (index, mask) = place(u, false);
            if self.bit(overlay, zone, u, false) || reserved[index as usize] & mask != 0 {
                run = 0;
                continue;
            }
            run += 1;
            if run == count {
                let first = u + 1 - count;
                shared.cursors[zone] = u + 1;
                set_reserved(reserved, first, count, true);
                overlay.allocated.push((zone, first, count));
                self.mark(overlay, zone, first, count, true);
                return Some(first);
            }
        }
        None
    }

    /// Bytes of zone `zone`'s bitmap.
    pub fn len(&self, zone: usize) -> u64 {
        self.data[zone].len() as u64
    }

    /// Ends the reservations of `overlay`'s transaction, which did not commit.
    pub fn abandon(&self, overlay: &Overlay) {
        if !overlay.allocated.is_empty() {
            Self::release(&mut self.lock(), overlay);
        }
    }

    /// Ends `overlay`'s reservations (its transaction committed or aborted).
    fn release(shared: &mut Shared, overlay: &Overlay) {
        for &(zone, unit, count) in &overlay.allocated {
            set_reserved(&mut shared.reserved[zone], unit, count, false);
        }
    }

    /// The changes of `overlay` in pool order: (zone, byte), committed and new value.
    pub fn changes<'o>(
        &'o self,
        overlay: &'o mut Overlay,
    ) -> impl Iterator<Item = ((usize, u64), u8, u8)> + 'o {
        overlay.changes.sort_unstable_by_key(|(k, ..)| *k);
        overlay.changes.iter().map(|&((zone, index), v, m)| {
            let old = self.committed(zone, index);
            ((zone, index), old, rebase(old, v, m))
        })
    }

    /// Applies a committed overlay (and the new checksums) to the mirrors, under the lock
    /// the commit holds, and ends its reservations.
    pub fn apply(&self, shared: &mut Shared, overlay: &Overlay, sums: &[(usize, u32)]) {
        for &((zone, index), value, mask) in &overlay.changes {
            let byte = &self.data[zone][index as usize];
            byte.store(
                rebase(byte.load(Ordering::Relaxed), value, mask),
                Ordering::Relaxed,
            );
        }
        for &(zone, sum) in sums {
            shared.sums[zone] = sum;
        }
        Self::release(shared, overlay);
    }
}

/// Sets (or clears) the allocated bits of `count` units from `unit` in `bits`.
fn set_reserved(bits: &mut [u8], unit: u64, count: u64, value: bool) {
    for u in unit..unit + count {
        let (index, mask) = place(u, false);
        if value {
            bits[index as usize] |= mask;
        } else {
            bits[index as usize] &= !mask;
        }
    }
}

/// The byte and bit mask of a unit's allocated (or first-unit) bit.
fn place(unit: u64, first: bool) -> (u64, u8) {
    (unit / 4, 1 << (2 * (unit % 4) + u64::from(first)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_found_marked_and_measured() {
        let mut maps = Bitmaps::default();
        maps.push(vec![0; 4], 0); // 16 units
        let mut overlay = Overlay::new();
        maps.mark(&mut overlay, 0, 0, 3, true);
        let mut shared = maps.lock();
        let a = maps.reserve(&mut shared, &mut overlay, 0, 16, 2).unwrap();
        assert_eq!(a, 3);
        assert_eq!(maps.extent(&overlay, 0, 0, 16), 3);
        assert_eq!(maps.extent(&overlay, 0, 3, 16), 2);
        assert!(maps.is_object(&overlay, 0, 3) && !maps.is_object(&overlay, 0, 4));
        maps.mark(&mut overlay, 0, 0, 3, false);
        // The cursor is past `a`; a run of 12 exists only after it wraps... it does not:
        assert_eq!(maps.reserve(&mut shared, &mut overlay, 0, 16, 12), None);
        assert_eq!(maps.reserve(&mut shared, &mut overlay, 0, 16, 11), Some(5));
        assert_eq!(maps.reserve(&mut shared, &mut overlay, 0, 16, 3), Some(0));
        assert!(
            maps.bytes(0).iter().all(|&b| b == 0),
            "the overlay holds the changes"
        );
    }

    /// Two transactions allocating at once get different units, and their commits, in
    /// either order, keep each other's bits of a byte they share.
    #[test]
    fn interleaved_transactions_reserve_apart_and_keep_each_others_bits() {
        for a_first in [true, false] {
            let mut maps = Bitmaps::default();
            maps.push(vec![0; 4], 0); // 16 units
            let (mut a, mut b) = (Overlay::new(), Overlay::new());
            let mut shared = maps.lock();
            assert_eq!(maps.reserve(&mut shared, &mut a, 0, 16, 2), Some(0));
            // Bytes 0 and 1 hold units 0..4 and 4..8: b's run shares byte 0 with a's.
            assert_eq!(maps.reserve(&mut shared, &mut b, 0, 16, 3), Some(2));
            let (first, second) = if a_first { (&a, &b) } else { (&b, &a) };
            maps.apply(&mut shared, first, &[]);
            maps.apply(&mut shared, second, &[]);
            assert_eq!(maps.extent(&Overlay::new(), 0, 0, 16), 2);
            assert_eq!(maps.extent(&Overlay::new(), 0, 2, 16), 3);
            assert!(maps.is_committed_object(0, 0) && maps.is_committed_object(0, 2));
            assert!(shared.reserved[0].iter().all(|&r| r == 0), "released");
        }
    }

    #[test]
    fn spans_reads_committed_objects() {
        let mut maps = Bitmaps::default();
        maps.push(vec![0; 4], 0); // 16 units
        let mut overlay = Overlay::new();
        maps.mark(&mut overlay, 0, 0, 3, true);
        maps.mark(&mut overlay, 0, 3, 2, true);
        maps.mark(&mut overlay, 0, 14, 2, true);
        assert!(!maps.spans(0, 3, 2), "not committed yet");
        maps.apply(&mut maps.lock(), &overlay, &[]);
        assert!(
            maps.spans(0, 0, 3) && !maps.spans(0, 0, 4),
            "the next object starts"
        );
        assert!(
            maps.spans(0, 3, 2) && !maps.spans(0, 3, 3),
            "a free unit follows"
        );
        assert!(
            maps.spans(0, 14, 2) && !maps.spans(0, 14, 3),
            "the zone ends"
        );
    }
}
