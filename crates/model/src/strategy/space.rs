//! Enumerating and sampling a space of choices: a sequence of cuts, each with one digit
//! per item (line or block) whose value range depends on the cut.

use crate::SplitMix64;
use rustc_hash::FxHashSet;

/// A space of crash-image choices, walked cut by cut in increasing order.
pub trait Space {
    fn cuts(&self) -> usize;
    fn items(&self) -> usize;
    /// Moves to `cut`; cuts are visited in increasing order.
    fn advance_to(&mut self, cut: usize);
    /// How many digits item `i` has at the current cut.
    fn radix(&self, i: usize) -> u32;
    /// What digit `d` of item `i` stands for at the current cut.
    fn value(&self, i: usize, digit: u32) -> u32;
    /// The choice that takes everything.
    fn everything(&self) -> Vec<u32>;
}

/// One element of a space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Per item, how much of it is taken.
    pub values: Vec<u32>,
    pub cut: usize,
    /// Items whose digit is not 0 (for the thesis' "subset of dirty lines").
    pub raised: Vec<u32>,
    /// The sample draw that produced it, when sampled.
    pub draw: Option<u64>,
}

/// Generated candidates allowed per distinct one before enumeration gives up.
const ATTEMPTS_PER_CANDIDATE: usize = 8;

/// Every distinct element of the space, in cut order, or `None` when there are more than
/// `cap` (or the space is so redundant that finding them would take too long).
pub fn enumerate(space: &mut impl Space, cap: usize) -> Option<Vec<Candidate>> {
    let mut seen = FxHashSet::default();
    let mut out = Vec::new();
    let mut attempts = 0usize;
    for cut in 0..space.cuts() {
        space.advance_to(cut);
        let free: Vec<usize> = (0..space.items()).filter(|&i| space.radix(i) > 1).collect();
        let mut digits = vec![0u32; free.len()];
        loop {
            attempts += 1;
            if attempts > ATTEMPTS_PER_CANDIDATE * cap.max(1) {
                return None;
            }
            let candidate = build(space, cut, &free, &digits, None);
            if seen.insert(candidate.values.clone()) {
                out.push(candidate);
                if out.len() > cap {
                    return None;
                }
            }
            if !increment(&mut digits, |j| space.radix(free[j])) {
                break;
            }
        }
    }
    Some(out)
}

/// A seeded sample of at most `cap` distinct elements, always including "nothing" (all
/// zero) and "everything".
pub fn sample(space: &mut impl Space, cap: usize, seed: u64) -> Vec<Candidate> {
    let mut seen = FxHashSet::default();
    let mut out = Vec::new();
    let last = space.cuts() - 1;
    let ends = [(0, vec![0; space.items()]), (last, space.everything())];
    for (cut, values) in ends {
        if seen.insert(values.clone()) {
            let raised = raised_items(&values);
            out.push(Candidate {
                values,
                cut,
                raised,
                draw: None,
            });
        }
    }
    let mut rng = SplitMix64(seed);
    let mut draws: Vec<(usize, u64)> = (0..cap.saturating_sub(out.len()) as u64)
        .map(|draw| (rng.below(space.cuts() as u64) as usize, draw))
        .collect();
    draws.sort_unstable();
    for (cut, draw) in draws {
        space.advance_to(cut);
        let mut pick = SplitMix64(seed ^ draw.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let free: Vec<usize> = (0..space.items()).filter(|&i| space.radix(i) > 1).collect();
        let digits: Vec<u32> = free
            .iter()
            .map(|&i| pick.below(space.radix(i) as u64) as u32)
            .collect();
        let candidate = build(space, cut, &free, &digits, Some(draw));
        if seen.insert(candidate.values.clone()) {
            out.push(candidate);
        }
    }
    out
}

fn build(
    space: &impl Space,
    cut: usize,
    free: &[usize],
    digits: &[u32],
    draw: Option<u64>,
) -> Candidate {
    let mut values: Vec<u32> = (0..space.items()).map(|i| space.value(i, 0)).collect();
    let mut raised = Vec::new();
    for (&i, &d) in free.iter().zip(digits) {
        values[i] = space.value(i, d);
        if d != 0 {
            raised.push(i as u32);
        }
    }
    Candidate {
        values,
        cut,
        raised,
        draw,
    }
}

fn raised_items(values: &[u32]) -> Vec<u32> {
    (0..values.len() as u32)
        .filter(|&i| values[i as usize] != 0)
        .collect()
}

/// Mixed-radix increment; false when it wrapped around to all zeros.
fn increment(digits: &mut [u32], radix: impl Fn(usize) -> u32) -> bool {
    for (j, d) in digits.iter_mut().enumerate() {
        *d += 1;
        if *d < radix(j) {
            return true;
        }
        *d = 0;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent items with fixed radices and a single cut.
    struct Grid(Vec<u32>);

    impl Space for Grid {
        fn cuts(&self) -> usize {
            1
        }
        fn items(&self) -> usize {
            self.0.len()
        }
        fn advance_to(&mut self, _: usize) {}
        fn radix(&self, i: usize) -> u32 {
            self.0[i]
        }
        fn value(&self, _: usize, digit: u32) -> u32 {
            digit
        }
        fn everything(&self) -> Vec<u32> {
            self.0.iter().map(|r| r - 1).collect()
        }
    }

    #[test]
    fn enumerates_the_whole_grid_or_gives_up_above_the_cap() {
        let all = enumerate(&mut Grid(vec![2, 3, 1, 2]), 100).unwrap();
        assert_eq!(all.len(), 12);
        let distinct: FxHashSet<Vec<u32>> = all.iter().map(|c| c.values.clone()).collect();
        assert_eq!(distinct.len(), 12);
        assert!(enumerate(&mut Grid(vec![2, 3, 1, 2]), 11).is_none());
    }

    #[test]
    fn sample_is_seeded_distinct_and_keeps_both_ends() {
        let a = sample(&mut Grid(vec![5; 10]), 50, 7);
        let b = sample(&mut Grid(vec![5; 10]), 50, 7);
        let c = sample(&mut Grid(vec![5; 10]), 50, 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.len() <= 50 && a.len() > 40);
        assert_eq!(a[0].values, vec![0; 10]);
        assert_eq!(a[1].values, vec![4; 10]);
        let distinct: FxHashSet<Vec<u32>> = a.iter().map(|c| c.values.clone()).collect();
        assert_eq!(distinct.len(), a.len());
    }
}
