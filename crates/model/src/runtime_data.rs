//! PM the program under test declares run-time data (`hypercall volatile`, docs/design/model.md
//! "Run-time data"): the byte ranges, and whether a dirty line holds only such data.

use crate::pending::LineState;

/// Disjoint byte ranges [start, end), ascending.
#[derive(Debug, Default, Clone)]
pub struct RuntimeRanges {
    ranges: Vec<(u64, u64)>,
}

impl RuntimeRanges {
    /// Adds `len` bytes at `addr`, merging with the ranges it touches.
    pub fn add(&mut self, addr: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (mut start, mut end) = (addr, addr.saturating_add(len));
        self.ranges.retain(|&(s, e)| {
            let touches = s <= end && start <= e;
            if touches {
                start = start.min(s);
                end = end.max(e);
            }
            !touches
        });
        let at = self.ranges.partition_point(|&(s, _)| s < start);
        self.ranges.insert(at, (start, end));
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether every byte of [addr, addr + len) is run-time data.
    pub fn covers(&self, addr: u64, len: u64) -> bool {
        let at = self.ranges.partition_point(|&(_, e)| e <= addr);
        self.ranges
            .get(at)
            .is_some_and(|&(s, e)| s <= addr && addr + len <= e)
    }

    /// Whether every pending unit of `line` writes run-time data: then no crash image
    /// needs to differ in it (a line mixing both kinds is explored as usual).
    pub fn holds(&self, line: &LineState) -> bool {
        line.units()
            .iter()
            .all(|u| self.covers(u.addr, u.bytes().len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_when_they_touch_or_overlap() {
        let mut r = RuntimeRanges::default();
        r.add(0x100, 0x40);
        r.add(0x200, 0x40);
        r.add(0x140, 0x10); // touches the first
        assert_eq!(r.ranges, [(0x100, 0x150), (0x200, 0x240)]);
        r.add(0x120, 0x100); // joins both
        assert_eq!(r.ranges, [(0x100, 0x240)]);
        r.add(0x10, 0);
        assert_eq!(r.ranges, [(0x100, 0x240)]);
    }

    #[test]
    fn covers_only_whole_ranges_inside() {
        let mut r = RuntimeRanges::default();
        r.add(0x100, 0x40);
        r.add(0x180, 0x40);
        assert!(r.covers(0x100, 0x40));
        assert!(r.covers(0x1b8, 8));
        assert!(!r.covers(0xf8, 16), "starts before");
        assert!(!r.covers(0x13c, 8), "ends after");
        assert!(!r.covers(0x140, 0x48), "spans the gap");
        assert!(!RuntimeRanges::default().covers(0, 1));
    }
}
