//! Allocation state: each zone's bitmap object (an allocated bit and a first-unit bit per
//! 64-byte unit, side by side: bits 2k and 2k + 1 of byte u / 4 for unit u = 4·byte + k, so
//! that an allocation changes one byte, not one in each of two halves), mirrored in DRAM,
//! and a transaction's pending changes to it, which commit writes through the redo log
//! like any other object bytes.

/// DRAM mirrors of the zones' bitmap objects and their checksums, as on PM.
#[derive(Debug, Default)]
pub struct Bitmaps {
    pub data: Vec<Vec<u8>>,
    pub sums: Vec<u32>,
    /// Where each zone's next search starts (volatile).
    cursors: Vec<u64>,
}

/// A transaction's new bitmap bytes, (zone, byte) and value, in the order first changed:
/// a transaction changes a few bytes, so a vector searched from the end beats a map.
#[derive(Debug, Default)]
pub struct Overlay(Vec<((usize, u64), u8)>);

impl Overlay {
    pub fn new() -> Self {
        Overlay(Vec::new())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn get(&self, key: (usize, u64)) -> Option<u8> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    fn insert(&mut self, key: (usize, u64), value: u8) {
        match self.0.iter_mut().rev().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }

    /// The changes in pool order.
    pub fn sorted(&mut self) -> &[((usize, u64), u8)] {
        self.0.sort_unstable_by_key(|(k, _)| *k);
        &self.0
    }

    /// Forgets the changes, keeping the room they took.
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

impl Bitmaps {
    pub fn push(&mut self, data: Vec<u8>, sum: u32) {
        self.data.push(data);
        self.sums.push(sum);
        self.cursors.push(0);
    }

    fn byte(&self, overlay: &Overlay, zone: usize, index: u64) -> u8 {
        // Reads outside a transaction pass an empty overlay: skip the map.
        if overlay.is_empty() {
            return self.data[zone][index as usize];
        }
        overlay
            .get((zone, index))
            .unwrap_or(self.data[zone][index as usize])
    }

    fn bit(&self, overlay: &Overlay, zone: usize, unit: u64, first: bool) -> bool {
        let (index, mask) = place(unit, first);
        self.byte(overlay, zone, index) & mask != 0
    }

    fn set(&self, overlay: &mut Overlay, zone: usize, unit: u64, first: bool, value: bool) {
        let (index, mask) = place(unit, first);
        let byte = self.byte(overlay, zone, index);
        let new = if value { byte | mask } else { byte & !mask };
        overlay.insert((zone, index), new);
    }

    #[inline]
    pub fn is_object(&self, overlay: &Overlay, zone: usize, unit: u64) -> bool {
        if overlay.is_empty() {
            return self.is_committed_object(zone, unit);
        }
        self.bit(overlay, zone, unit, true) && self.bit(overlay, zone, unit, false)
    }

    /// Whether a committed object starts at `unit`: its two bits read in place (every
    /// direct read asks).
    #[inline]
    pub fn is_committed_object(&self, zone: usize, unit: u64) -> bool {
        let both = 3 << (2 * (unit % 4));
        self.data[zone]
            .get((unit / 4) as usize)
            .is_some_and(|b| b & both == both)
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
                .map_or(0, |b| b >> (2 * (u % 4)) & 3);
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

    /// The first run of `count` free units in `zone` (of `units`), from the zone's cursor.
    pub fn find(&mut self, overlay: &Overlay, zone: usize, units: u64, count: u64) -> Option<u64> {
        let start = self.cursors[zone];
        let mut run = 0;
        // Two passes from the cursor, so a run wrapping the zone's end is found from 0.
        for u in (start..units).chain(0..units) {
            if u == 0 {
                run = 0;
            }
            if self.bit(overlay, zone, u, false) {
                run = 0;
                continue;
            }
            run += 1;
            if run == count {
                let first = u + 1 - count;
                self.cursors[zone] = u + 1;
                return Some(first);
            }
        }
        None
    }

    /// Applies a committed overlay (and the new checksums) to the mirrors.
    pub fn apply(&mut self, overlay: &Overlay, sums: &[(usize, u32)]) {
        for &((zone, index), value) in &overlay.0 {
            self.data[zone][index as usize] = value;
        }
        for &(zone, sum) in sums {
            self.sums[zone] = sum;
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
        let a = maps.find(&overlay, 0, 16, 2).unwrap();
        maps.mark(&mut overlay, 0, a, 2, true);
        assert_eq!(a, 3);
        assert_eq!(maps.extent(&overlay, 0, 0, 16), 3);
        assert_eq!(maps.extent(&overlay, 0, 3, 16), 2);
        assert!(maps.is_object(&overlay, 0, 3) && !maps.is_object(&overlay, 0, 4));
        maps.mark(&mut overlay, 0, 0, 3, false);
        // The cursor is past `a`; a run of 12 exists only after it wraps... it does not:
        assert_eq!(maps.find(&overlay, 0, 16, 12), None);
        assert_eq!(maps.find(&overlay, 0, 16, 11), Some(5));
        assert_eq!(maps.find(&overlay, 0, 16, 3), Some(0));
        assert!(
            maps.data[0].iter().all(|&b| b == 0),
            "the overlay holds the changes"
        );
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
        maps.apply(&overlay, &[]);
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
