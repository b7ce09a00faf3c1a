//! Per-cache-line state of a one-pass trace analysis, kept in pages of consecutive lines.
//!
//! A hash map of lines costs two memory accesses per lookup on a table larger than the CPU
//! caches (its control bytes, then the slot): `persim analyze` spent half of its time in
//! that probe. The map of pages is small and stays cached, so a lookup costs the one access
//! to the line's own state, and lines stored to one after another share a page.

use rustc_hash::FxHashMap;

/// Lines per page: 64 KiB of PM.
const PAGE_LINES: u64 = 1024;

/// `T` for every line number (address / 64), default until first touched.
pub(crate) struct LineTable<T> {
    pages: FxHashMap<u64, Box<[T]>>,
}

impl<T: Default> LineTable<T> {
    pub(crate) fn new() -> Self {
        LineTable {
            pages: FxHashMap::default(),
        }
    }

    /// The state of `line` (a line number), made when first asked for.
    pub(crate) fn get_or_default(&mut self, line: u64) -> &mut T {
        let page = self
            .pages
            .entry(line / PAGE_LINES)
            .or_insert_with(|| (0..PAGE_LINES).map(|_| T::default()).collect());
        &mut page[(line % PAGE_LINES) as usize]
    }

    /// The state of `line`, or None if no line of its page was ever asked for.
    pub(crate) fn get_mut(&mut self, line: u64) -> Option<&mut T> {
        let page = self.pages.get_mut(&(line / PAGE_LINES))?;
        Some(&mut page[(line % PAGE_LINES) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_own_state_across_pages_and_far_apart() {
        let mut table = LineTable::<u64>::new();
        for line in [
            0,
            1,
            PAGE_LINES - 1,
            PAGE_LINES,
            5 * PAGE_LINES + 3,
            u64::MAX / 64,
        ] {
            *table.get_or_default(line) += line + 1;
        }
        assert_eq!(table.get_mut(PAGE_LINES - 1).copied(), Some(PAGE_LINES));
        assert_eq!(table.get_mut(PAGE_LINES).copied(), Some(PAGE_LINES + 1));
        assert_eq!(
            table.get_mut(u64::MAX / 64).copied(),
            Some(u64::MAX / 64 + 1)
        );
        // Untouched lines of a page that exists are default; of a page that does not, None.
        assert_eq!(table.get_mut(2).copied(), Some(0));
        assert_eq!(table.get_mut(7 * PAGE_LINES), None);
    }
}
