//! The pending state of PM: per-line pending sequences with flush marks (docs/design/model.md).

use crate::config::CacheMode;
use crate::unit::{split_store, Unit, LINE, WORD};
use rustc_hash::FxHashMap;

/// The units written to one line since it was last made durable.
#[derive(Debug, Default)]
pub struct LineState {
    pub line: u64,
    units: Vec<Unit>,
    flush_mark: usize,
    /// One past the last NT unit: a fence makes at least this prefix durable.
    nt_end: usize,
    /// Already listed for the next fence to drain.
    queued: bool,
}

impl LineState {
    pub fn units(&self) -> &[Unit] {
        &self.units
    }

    /// The flush mark f_L, 0 when the line was not flushed since the last fence.
    pub fn flush_mark(&self) -> usize {
        self.flush_mark
    }

    /// Whether every pending unit writes the bytes the durable image already holds
    /// (`durable` reads them): whichever prefix persists, the line stays as it is, so
    /// exploring it adds candidates but no image (ext4 zeroing a block that is zero).
    pub fn rewrites_durable(&self, mut durable: impl FnMut(u64, &mut [u8])) -> bool {
        let mut word = [0u8; WORD as usize];
        self.units.iter().all(|unit| {
            let held = &mut word[..unit.bytes().len()];
            durable(unit.addr, held);
            held == unit.bytes()
        })
    }
}

/// All lines with pending units.
#[derive(Debug, Default)]
pub struct PmPending {
    lines: FxHashMap<u64, LineState>,
    /// Lines a fence may change: flushed or NT-written (volatile), or any dirty line (eADR).
    to_drain: Vec<u64>,
    next_seq: u64,
}

impl PmPending {
    pub fn store(&mut self, mode: CacheMode, addr: u64, data: &[u8], nt: bool, entry: u64) {
        let first_seq = self.next_seq;
        self.next_seq += data.len() as u64;
        for unit in split_store(addr, data, nt, entry, first_seq) {
            let line = unit.line();
            let state = self.lines.entry(line).or_insert_with(|| LineState {
                line,
                ..LineState::default()
            });
            state.units.push(unit);
            let drains = nt || mode == CacheMode::Persistent;
            if nt {
                state.nt_end = state.units.len();
            }
            if drains && !state.queued {
                state.queued = true;
                self.to_drain.push(line);
            }
        }
    }

    /// Sets the line's flush mark (no effect with persistent caches).
    pub fn flush(&mut self, mode: CacheMode, addr: u64) {
        if mode == CacheMode::Persistent {
            return;
        }
        if let Some(state) = self.lines.get_mut(&(addr & !(LINE - 1))) {
            state.flush_mark = state.units.len();
            if !state.queued {
                state.queued = true;
                self.to_drain.push(state.line);
            }
        }
    }

    /// Makes the fenced prefixes durable, handing each durable unit to `persist` in order.
    pub fn fence(&mut self, mode: CacheMode, mut persist: impl FnMut(&Unit)) {
        for line in self.to_drain.drain(..) {
            let Some(state) = self.lines.get_mut(&line) else {
                continue;
            };
            let durable = match mode {
                CacheMode::Volatile => state.flush_mark.max(state.nt_end),
                CacheMode::Persistent => state.units.len(),
            };
            state.units.drain(..durable).for_each(|u| persist(&u));
            state.flush_mark = 0;
            state.nt_end = 0;
            state.queued = false;
            if state.units.is_empty() {
                self.lines.remove(&line);
            }
        }
    }

    /// Whether `line` (a line address) has pending units.
    pub fn is_dirty(&self, line: u64) -> bool {
        self.lines.contains_key(&line)
    }

    /// The dirty lines in address order.
    pub fn dirty_lines(&self) -> Vec<&LineState> {
        let mut lines: Vec<&LineState> = self.lines.values().collect();
        lines.sort_unstable_by_key(|l| l.line);
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(p: &mut PmPending, mode: CacheMode) -> Vec<u64> {
        let mut out = Vec::new();
        p.fence(mode, |u| out.push(u.addr));
        out
    }

    #[test]
    fn fence_persists_flushed_prefix_and_nt_stores() {
        let mut p = PmPending::default();
        let v = CacheMode::Volatile;
        p.store(v, 0x00, &[1; 8], false, 0);
        p.flush(v, 0x3f);
        p.store(v, 0x08, &[2; 8], false, 1); // after the flush: stays pending
        p.store(v, 0x40, &[3; 8], false, 2); // never flushed: stays pending
        p.store(v, 0x80, &[4; 8], false, 3);
        p.store(v, 0x88, &[5; 8], true, 4); // NT: pulls the cached unit before it along
        assert_eq!(drain(&mut p, v), vec![0x00, 0x80, 0x88]);
        let left: Vec<(u64, usize)> = p
            .dirty_lines()
            .iter()
            .map(|l| (l.line, l.units().len()))
            .collect();
        assert_eq!(left, vec![(0x00, 1), (0x40, 1)]);
        assert!(p.dirty_lines().iter().all(|l| l.flush_mark() == 0));
    }

    #[test]
    fn persistent_fence_drains_everything_and_ignores_flushes() {
        let mut p = PmPending::default();
        let e = CacheMode::Persistent;
        p.store(e, 0x00, &[1; 8], false, 0);
        p.flush(e, 0x00);
        p.store(e, 0x40, &[2; 8], false, 1);
        assert_eq!(p.dirty_lines()[0].flush_mark(), 0);
        assert_eq!(drain(&mut p, e), vec![0x00, 0x40]);
        assert!(p.dirty_lines().is_empty());
    }
}
