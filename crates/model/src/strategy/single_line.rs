//! `single-line`: nothing and everything pending, plus each dirty line alone persisted
//! and each alone lost (docs/design/model.md). Deterministic and linear in the dirty lines: the
//! images a missing fence between two lines needs (a commit record durable while one
//! line it covers is not), without sampling the product of all lines.

use super::cut::CutSpace;
use super::space::Space;
use super::Side;
use crate::origin::Choice;
use crate::SplitMix64;
use rustc_hash::FxHashSet;

/// The choices of `space` (`exhaustive`'s windows): at its first cut every line at its
/// window's lower end but one at its upper end, and at its last cut every line at its
/// upper end but one at its lower end, for each line with `toggled[i]`. With volatile
/// caches that is "only line i persisted" and "only line i lost"; with persistent
/// caches, the same as far as the store buffer, which drains in program order, allows.
/// Above `cap`, a seeded sample that keeps "nothing" and "everything".
pub(super) fn single_line(
    space: &CutSpace,
    addrs: &[u64],
    toggled: &[bool],
    cap: usize,
    seed: u64,
) -> Side {
    let mut sweep = space.sweep();
    let everything = sweep.everything();
    let mut seen = FxHashSet::default();
    let mut picks = Vec::new();
    let mut add = |values: Vec<u32>, choice: Choice| {
        if seen.insert(values.clone()) {
            picks.push((values, choice));
        }
    };
    add(vec![0; addrs.len()], Choice::Nothing);
    add(everything.clone(), Choice::Everything);
    let last = sweep.cuts() - 1;
    for (cut, persisted) in [(0, true), (last, false)] {
        sweep.advance_to(cut);
        let windows: Vec<(u32, u32)> = (0..addrs.len()).map(|i| sweep.window(i)).collect();
        let base: Vec<u32> = match persisted {
            true => windows.iter().map(|&(lo, _)| lo).collect(),
            false => windows.iter().map(|&(_, hi)| hi).collect(),
        };
        for i in (0..addrs.len()).filter(|&i| toggled[i]) {
            let mut values = base.clone();
            values[i] = match persisted {
                true => windows[i].1,
                false => windows[i].0,
            };
            let choice = Choice::SingleLine {
                line: addrs[i],
                persisted,
            };
            add(values, choice);
        }
    }
    let incomplete = picks.len() > cap;
    if incomplete {
        // Keep the two ends, draw the rest (a partial Fisher-Yates shuffle).
        let mut rng = SplitMix64(seed);
        for k in 2..cap {
            let j = k + rng.below((picks.len() - k) as u64) as usize;
            picks.swap(k, j);
        }
        picks.truncate(cap);
    }
    let space = (!incomplete).then_some(picks.len() as u128);
    Side {
        picks,
        incomplete,
        space,
    }
}
