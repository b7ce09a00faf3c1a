//! The space of per-line prefix choices a strategy walks: a sequence of cuts through an
//! ordered list of units, each cut giving every dirty line a window [lo, hi] of prefix
//! lengths it may take.
//!
//! - volatile `exhaustive`: one cut, every line's window is [0, len];
//! - volatile `global-prefix`: cuts through all pending units in global order; a line's
//!   window runs from the units before the cut to its whole sequence;
//! - persistent caches: cuts through the cached units in global order (the store buffer
//!   drains in order); a line's window runs from just after its last cached unit before
//!   the cut to just before its first cached unit after it (docs/design/model.md);
//! - `reads`: cuts through the cached units and the runs of NT units of a line (in both
//!   cache modes, so a line's NT units go all or nothing), only after units of the
//!   explored lines, which take either end; the other lines follow the cut (their
//!   window's lower end), so no image differs from another only in lines recovery does
//!   not read;
//! - `global-prefix` with lines that hold only the program's run-time data: as `reads`
//!   with every other line explored.

use super::space::Space;
use crate::pending::LineState;
use crate::unit::Unit;

/// Which prefix lengths inside a window a strategy takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Every length in the window (exact set).
    AnyInWindow,
    /// Only the window's two ends (the thesis' subsets of dirty lines).
    Endpoints,
}

pub struct CutSpace {
    lens: Vec<u32>,
    /// Per line, the positions of its units that cuts pass, ascending.
    barriers: Vec<Vec<u32>>,
    /// Per line and barrier: it ends a run of NT units (`reads`), so a window that ends
    /// before the barrier ends after it instead: the run goes whole.
    nt_run_end: Vec<Vec<bool>>,
    /// The line of each barrier unit, in cut order.
    order: Vec<u32>,
    /// The window ends before the next barrier (persistent) or at the line's end.
    hi_is_next: bool,
    pick: Pick,
    /// Per line: it only follows the cut (one value, the window's lower end).
    follows: Vec<bool>,
    /// The positions in `order` where cuts are taken; `None`: at every position.
    cut_at: Option<Vec<u32>>,
}

impl CutSpace {
    pub fn volatile_exhaustive(lines: &[&LineState]) -> CutSpace {
        CutSpace {
            lens: lens(lines),
            barriers: vec![Vec::new(); lines.len()],
            nt_run_end: vec![Vec::new(); lines.len()],
            order: Vec::new(),
            hi_is_next: false,
            pick: Pick::AnyInWindow,
            follows: vec![false; lines.len()],
            cut_at: None,
        }
    }

    pub fn volatile_global_prefix(lines: &[&LineState]) -> CutSpace {
        Self::ordered(lines, |_, _| true, false, Pick::Endpoints)
    }

    pub fn persistent(lines: &[&LineState], pick: Pick) -> CutSpace {
        Self::ordered(lines, |units, i| !units[i].nt, true, pick)
    }

    /// `reads`: the cuts pass cached units one by one and each run of consecutive NT
    /// units of a line at once (its NT stores go all or nothing); cuts are taken only
    /// after units of the lines with `explore[i]` set, which take either end of their
    /// window; every other line follows the cut (the lower end).
    pub fn guided(lines: &[&LineState], explore: &[bool], persistent: bool) -> CutSpace {
        let run_end =
            |units: &[Unit], i: usize| !units[i].nt || units.get(i + 1).is_none_or(|next| !next.nt);
        Self::ordered(lines, run_end, persistent, Pick::Endpoints).exploring(explore)
    }

    /// The same space where only the lines with `explore[i]` set take either end of their
    /// window and cuts are taken only after their units; the other lines follow the cut.
    pub fn exploring(mut self, explore: &[bool]) -> CutSpace {
        let mut cut_at = vec![0];
        for (pos, &line) in self.order.iter().enumerate() {
            if explore[line as usize] {
                cut_at.push(pos as u32 + 1);
            }
        }
        // The last cut passes every unit: "everything" stays one of the images.
        if cut_at.last() != Some(&(self.order.len() as u32)) {
            cut_at.push(self.order.len() as u32);
        }
        self.follows = explore.iter().map(|&e| !e).collect();
        self.cut_at = Some(cut_at);
        self
    }

    /// `exhaustive`'s windows, cut through the cached units only, in either cache mode
    /// (where `reads` finds NT-store prefixes).
    pub fn nt_windows(lines: &[&LineState], persistent: bool) -> CutSpace {
        Self::ordered(
            lines,
            |units, i| !units[i].nt,
            persistent,
            Pick::AnyInWindow,
        )
    }

    /// How many units of the global order cut number `cut` passes.
    pub fn position(&self, cut: usize) -> usize {
        self.cut_at.as_ref().map_or(cut, |at| at[cut] as usize)
    }

    fn ordered(
        lines: &[&LineState],
        is_barrier: impl Fn(&[Unit], usize) -> bool,
        hi_is_next: bool,
        pick: Pick,
    ) -> CutSpace {
        let mut barriers = vec![Vec::new(); lines.len()];
        let mut nt_run_end = vec![Vec::new(); lines.len()];
        let mut by_seq = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            for (pos, unit) in line.units().iter().enumerate() {
                if is_barrier(line.units(), pos) {
                    barriers[i].push(pos as u32);
                    nt_run_end[i].push(unit.nt);
                    by_seq.push((unit.seq, i as u32));
                }
            }
        }
        by_seq.sort_unstable();
        CutSpace {
            lens: lens(lines),
            barriers,
            nt_run_end,
            order: by_seq.into_iter().map(|(_, line)| line).collect(),
            hi_is_next,
            pick,
            follows: vec![false; lines.len()],
            cut_at: None,
        }
    }

    /// How many distinct choices a walk of the whole space meets (saturating), without
    /// enumerating them: `None` where windows end before the next barrier (persistent
    /// caches) or every length in them is taken. At each cut the lines whose window is
    /// open take either end, 2^open choices; a choice already met at an earlier cut was
    /// met at the previous one, which it shares exactly when no following line moved in
    /// between and every line that moved takes its whole sequence.
    pub fn count(&self) -> Option<u128> {
        if self.hi_is_next || self.pick != Pick::Endpoints {
            return None;
        }
        let pow2 = |k: u32| 1u128.checked_shl(k).unwrap_or(u128::MAX);
        let mut sweep = self.sweep();
        let mut total = 0u128;
        let mut moved: Vec<u32> = Vec::new();
        for cut in 0..sweep.cuts() {
            let from = sweep.position;
            sweep.advance_to(cut);
            moved.clear();
            moved.extend(&self.order[from..sweep.position]);
            let open = |i: usize| sweep.radix(i) > 1;
            let choices = pow2((0..self.lens.len()).filter(|&i| open(i)).count() as u32);
            let shared = if cut == 0 || moved.iter().any(|&l| self.follows[l as usize]) {
                0
            } else {
                moved.sort_unstable();
                moved.dedup();
                let fixed = moved.iter().filter(|&&l| open(l as usize)).count() as u32;
                choices >> fixed
            };
            total = total.saturating_add(choices - shared);
        }
        Some(total)
    }

    pub fn sweep(&self) -> Sweep<'_> {
        Sweep {
            space: self,
            passed: vec![0; self.lens.len()],
            cut: 0,
            position: 0,
        }
    }
}

fn lens(lines: &[&LineState]) -> Vec<u32> {
    lines.iter().map(|l| l.units().len() as u32).collect()
}

/// Walks the cuts in increasing order, keeping every line's window up to date.
pub struct Sweep<'a> {
    space: &'a CutSpace,
    passed: Vec<u32>,
    cut: usize,
    /// Units of the global order passed.
    position: usize,
}

impl Sweep<'_> {
    /// The window of prefix lengths line `i` may take at the current cut.
    pub fn window(&self, i: usize) -> (u32, u32) {
        let barriers = &self.space.barriers[i];
        let passed = self.passed[i] as usize;
        let lo = if passed == 0 {
            0
        } else {
            barriers[passed - 1] + 1
        };
        let hi = match barriers.get(passed) {
            Some(&next) if self.space.hi_is_next => {
                next + u32::from(self.space.nt_run_end[i][passed])
            }
            _ => self.space.lens[i],
        };
        (lo, hi)
    }
}

impl Space for Sweep<'_> {
    fn cuts(&self) -> usize {
        self.space
            .cut_at
            .as_ref()
            .map_or(self.space.order.len() + 1, Vec::len)
    }

    fn items(&self) -> usize {
        self.space.lens.len()
    }

    fn advance_to(&mut self, cut: usize) {
        debug_assert!(cut >= self.cut && cut < self.cuts());
        let to = self.space.position(cut);
        while self.position < to {
            self.passed[self.space.order[self.position] as usize] += 1;
            self.position += 1;
        }
        self.cut = cut;
    }

    fn radix(&self, i: usize) -> u32 {
        let (lo, hi) = self.window(i);
        if self.space.follows[i] {
            return 1;
        }
        match self.space.pick {
            Pick::AnyInWindow => hi - lo + 1,
            Pick::Endpoints if lo == hi => 1,
            Pick::Endpoints => 2,
        }
    }

    fn value(&self, i: usize, digit: u32) -> u32 {
        let (lo, hi) = self.window(i);
        match self.space.pick {
            Pick::AnyInWindow => lo + digit,
            Pick::Endpoints if digit == 0 => lo,
            Pick::Endpoints => hi,
        }
    }

    fn everything(&self) -> Vec<u32> {
        self.space.lens.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CacheMode;
    use crate::pending::PmPending;
    use crate::strategy::space::enumerate;
    use crate::SplitMix64;

    /// Random stores of 1–16 bytes into a few lines.
    fn pending(seed: u64) -> PmPending {
        let mut rng = SplitMix64(seed);
        let mut pending = PmPending::default();
        for entry in 0..rng.below(12) + 1 {
            let addr = rng.below(5) * 64 + rng.below(7) * 8;
            let len = rng.below(16) as usize + 1;
            let nt = rng.below(4) == 0;
            pending.store(CacheMode::Volatile, addr, &vec![1; len], nt, entry);
        }
        pending
    }

    #[test]
    fn count_is_the_number_of_distinct_choices_enumerated() {
        for seed in 0..300 {
            let pending = pending(seed);
            let lines = pending.dirty_lines();
            let mut rng = SplitMix64(!seed);
            let explore: Vec<bool> = lines.iter().map(|_| rng.below(3) != 0).collect();
            let guided = CutSpace::guided(&lines, &explore, false);
            for space in [
                CutSpace::volatile_global_prefix(&lines),
                CutSpace::volatile_global_prefix(&lines).exploring(&explore),
                guided,
            ] {
                let all = enumerate(&mut space.sweep(), 1 << 20).unwrap();
                assert_eq!(space.count(), Some(all.len() as u128), "seed {seed}");
            }
        }
    }

    #[test]
    fn count_saturates_and_declines_windows_it_cannot_count() {
        let mut pending = PmPending::default();
        for line in 0..130 {
            pending.store(CacheMode::Volatile, line * 64, &[1], false, line);
        }
        let lines = pending.dirty_lines();
        assert_eq!(
            CutSpace::volatile_global_prefix(&lines).count(),
            Some(u128::MAX)
        );
        assert_eq!(CutSpace::volatile_exhaustive(&lines).count(), None);
        assert_eq!(CutSpace::persistent(&lines, Pick::Endpoints).count(), None);
    }
}
