//! Strategies: which crash images to materialise at a failure point (docs/design/model.md,
//! "Strategies"). Every image chosen here lies in the model's exact set.

mod cut;
mod single_line;
mod space;

use crate::config::{CacheMode, Config, Strategy};
use crate::origin::{Choice, FailureKind};
use crate::pending::LineState;
use cut::{CutSpace, Pick};
use rustc_hash::FxHashSet;
use space::{enumerate, sample, Candidate, Space};

/// One crash image to materialise, as a choice on top of the persisted image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashImage {
    /// How the pending PM units were chosen.
    pub choice: Choice,
    /// How the pending block writes were chosen (`None`: no block write was pending).
    pub block: Option<Choice>,
    /// Per dirty line (address order): the length of the applied prefix of its sequence.
    pub(crate) line_prefixes: Vec<u32>,
    /// Per block with pending writes (block order): 0 = durable content, n = n-th write.
    pub(crate) block_writes: Vec<u32>,
}

/// Per dirty line (address order), how the `reads` and `global-prefix` strategies treat it.
#[derive(Clone, Debug, Default)]
pub struct Guided {
    /// Its pending units are explored (otherwise they follow the cut): under `reads`, a
    /// line recovery reads; under both, not a line of only run-time data.
    pub explore: Vec<bool>,
    /// Its NT units also persist as every program-order prefix, one line at a time, with
    /// the other lines' pending units all lost or all durable (otherwise all or nothing).
    pub nt_prefixes: Vec<bool>,
    /// The pending block writes follow the cut (a mechanism says no recovery reads them):
    /// `reads`, `global-prefix` and `single-line` leave them all lost.
    pub blocks_follow: bool,
}

/// The crash images of one failure point.
#[derive(Clone, Debug, Default)]
pub struct CrashImages {
    pub images: Vec<CrashImage>,
    /// The set was larger than the cap, so `images` is a seeded sample of it.
    pub incomplete: bool,
    /// How many images the whole set holds (`images.len()` unless sampled; `None`: a
    /// sampled set this strategy cannot count), saturating.
    pub space: Option<u128>,
}

/// The choices of one side (PM or block device).
struct Side {
    picks: Vec<(Vec<u32>, Choice)>,
    incomplete: bool,
    /// How many picks the whole space holds (`None`: sampled and not countable).
    space: Option<u128>,
}

/// Chooses the crash images at a failure point of `kind` for the given pending state:
/// `lines` in address order, how `reads` treats each of them, and, per block with pending
/// writes, how many writes it has.
pub fn choose(
    config: &Config,
    kind: FailureKind,
    seed: u64,
    lines: &[&LineState],
    guided: &Guided,
    block_writes: &[u32],
) -> CrashImages {
    let cap = config.max_images.max(2);
    let lens: Vec<u32> = lines.iter().map(|l| l.units().len() as u32).collect();
    let (pm, block) = if kind == FailureKind::Blkflush {
        let pm = ends(lens);
        let block = block_side(
            config,
            true,
            guided.blocks_follow,
            block_writes,
            cap / pm.picks.len(),
            seed ^ 1,
        );
        (pm, block)
    } else {
        let block = block_side(
            config,
            false,
            guided.blocks_follow,
            block_writes,
            cap,
            seed ^ 1,
        );
        let per_block = block.as_ref().map_or(1, |b| b.picks.len());
        (
            pm_side(config, kind, lines, guided, &lens, cap / per_block, seed),
            block,
        )
    };
    let incomplete = pm.incomplete || block.as_ref().is_some_and(|b| b.incomplete);
    let space = match &block {
        Some(b) => pm.space.zip(b.space).map(|(p, b)| p.saturating_mul(b)),
        None => pm.space,
    };
    let block_picks: Vec<(Vec<u32>, Option<Choice>)> = match block {
        Some(side) => side.picks.into_iter().map(|(v, c)| (v, Some(c))).collect(),
        None => vec![(Vec::new(), None)],
    };
    let mut images = Vec::new();
    for (line_prefixes, choice) in &pm.picks {
        for (block_writes, block_choice) in &block_picks {
            images.push(CrashImage {
                choice: choice.clone(),
                block: block_choice.clone(),
                line_prefixes: line_prefixes.clone(),
                block_writes: block_writes.clone(),
            });
        }
    }
    CrashImages {
        images,
        incomplete,
        space,
    }
}

fn pm_side(
    config: &Config,
    kind: FailureKind,
    lines: &[&LineState],
    guided: &Guided,
    lens: &[u32],
    cap: usize,
    seed: u64,
) -> Side {
    let addrs: Vec<u64> = lines.iter().map(|l| l.line).collect();
    let persistent = config.cache == CacheMode::Persistent;
    let space = match (config.strategy, config.cache) {
        (Strategy::ProgramOrder, _) => return ends(lens.to_vec()),
        (Strategy::Fast, _) if matches!(kind, FailureKind::Flush | FailureKind::Fence) => {
            let mut side = ends(lens.to_vec());
            side.picks.drain(..side.picks.len() - 1);
            return side;
        }
        (Strategy::Fast, _) => return ends(lens.to_vec()),
        (Strategy::SingleLine, _) => {
            let space = match config.cache {
                CacheMode::Volatile => CutSpace::volatile_exhaustive(lines),
                CacheMode::Persistent => CutSpace::persistent(lines, Pick::Endpoints),
            };
            return single_line::single_line(&space, &addrs, &guided.explore, cap, seed);
        }
        (Strategy::Exhaustive, CacheMode::Volatile) => CutSpace::volatile_exhaustive(lines),
        (Strategy::Exhaustive, CacheMode::Persistent) => {
            CutSpace::persistent(lines, Pick::AnyInWindow)
        }
        (Strategy::GlobalPrefix, _) => {
            let space = if persistent {
                CutSpace::persistent(lines, Pick::Endpoints)
            } else {
                CutSpace::volatile_global_prefix(lines)
            };
            if guided.explore.iter().all(|&e| e) {
                space
            } else {
                space.exploring(&guided.explore)
            }
        }
        (Strategy::Reads, _) => CutSpace::guided(lines, &guided.explore, persistent),
    };
    let label = |c: &Candidate, number: usize, of: usize| match config.strategy {
        Strategy::GlobalPrefix | Strategy::Reads => Choice::GlobalPrefix {
            cut: space.position(c.cut) as u64,
            lines: c.raised.iter().map(|&i| addrs[i as usize]).collect(),
        },
        _ => exhaustive_label(c, number, of, seed),
    };
    let mut side = run(|| space.sweep(), cap, seed, label);
    if side.incomplete && config.strategy == Strategy::GlobalPrefix {
        side.space = space.count();
    }
    if config.strategy == Strategy::Reads {
        let windows = CutSpace::nt_windows(lines, persistent);
        add_nt_prefixes(&mut side, &windows, &addrs, &guided.nt_prefixes, cap);
    }
    side
}

/// The thesis' Suvi-NT images: for each line in `nt_lines`, every length in its window of
/// `space` (`exhaustive`'s windows) at the first cut (the other lines' pending units lost)
/// and at the last (all durable), so its NT units persist as program-order prefixes one
/// line at a time: linear in the units, not their product.
fn add_nt_prefixes(
    side: &mut Side,
    space: &CutSpace,
    addrs: &[u64],
    nt_lines: &[bool],
    cap: usize,
) {
    let mut seen: FxHashSet<Vec<u32>> = side.picks.iter().map(|(v, _)| v.clone()).collect();
    let mut sweep = space.sweep();
    let last = sweep.cuts() - 1;
    for (cut, others_durable) in [(0, false), (last, true)] {
        sweep.advance_to(cut);
        let base = if others_durable {
            sweep.everything()
        } else {
            vec![0; addrs.len()]
        };
        for i in (0..addrs.len()).filter(|&i| nt_lines[i]) {
            let (lo, hi) = sweep.window(i);
            for units in lo..=hi {
                let mut values = base.clone();
                values[i] = units;
                if !seen.insert(values.clone()) {
                    continue;
                }
                if side.picks.len() >= cap {
                    side.incomplete = true;
                    side.space = None;
                    return;
                }
                let choice = Choice::NtPrefix {
                    line: addrs[i],
                    units: u64::from(units),
                    others_durable,
                };
                side.picks.push((values, choice));
                side.space = side.space.map(|n| n + 1);
            }
        }
    }
}

fn block_side(
    config: &Config,
    at_block_flush: bool,
    follow: bool,
    block_writes: &[u32],
    cap: usize,
    seed: u64,
) -> Option<Side> {
    if block_writes.is_empty() {
        return None;
    }
    let scoped = matches!(
        config.strategy,
        Strategy::Reads | Strategy::GlobalPrefix | Strategy::SingleLine
    );
    if follow && scoped {
        let mut side = ends(block_writes.to_vec());
        side.picks.truncate(1);
        side.space = Some(1);
        return Some(side);
    }
    if !at_block_flush || config.strategy != Strategy::Exhaustive {
        return Some(ends(block_writes.to_vec()));
    }
    let label = |c: &Candidate, number: usize, of: usize| exhaustive_label(c, number, of, seed);
    Some(run(|| BlockSpace(block_writes), cap, seed, label))
}

/// Enumerates the space, or samples it when it holds more than `cap` elements. Each walk
/// gets a fresh space from `fresh`, since a walk only moves forward through the cuts.
fn run<S: Space>(
    fresh: impl Fn() -> S,
    cap: usize,
    seed: u64,
    label: impl Fn(&Candidate, usize, usize) -> Choice,
) -> Side {
    let everything = fresh().everything();
    let (candidates, incomplete) = match enumerate(&mut fresh(), cap) {
        Some(all) => (all, false),
        None => (sample(&mut fresh(), cap, seed), true),
    };
    let of = candidates.len();
    let picks = candidates
        .iter()
        .enumerate()
        .map(|(number, c)| {
            let choice = if c.values.iter().all(|&v| v == 0) {
                Choice::Nothing
            } else if c.values == everything {
                Choice::Everything
            } else {
                label(c, number, of)
            };
            (c.values.clone(), choice)
        })
        .collect();
    let space = (!incomplete).then_some(of as u128);
    Side {
        picks,
        incomplete,
        space,
    }
}

fn exhaustive_label(c: &Candidate, number: usize, of: usize, seed: u64) -> Choice {
    match c.draw {
        Some(draw) => Choice::Sampled { seed, draw },
        None => Choice::Enumerated {
            number: number as u64,
            of: of as u64,
        },
    }
}

/// Only "nothing pending" and "everything pending" (one image when they coincide).
fn ends(everything: Vec<u32>) -> Side {
    let mut picks = vec![(vec![0; everything.len()], Choice::Nothing)];
    if everything.iter().any(|&v| v != 0) {
        picks.push((everything, Choice::Everything));
    }
    let space = Some(picks.len() as u128);
    Side {
        picks,
        incomplete: false,
        space,
    }
}

/// Every block independently keeps its durable content or takes one of its pending writes.
struct BlockSpace<'a>(&'a [u32]);

impl Space for BlockSpace<'_> {
    fn cuts(&self) -> usize {
        1
    }
    fn items(&self) -> usize {
        self.0.len()
    }
    fn advance_to(&mut self, _: usize) {}
    fn radix(&self, i: usize) -> u32 {
        self.0[i] + 1
    }
    fn value(&self, _: usize, digit: u32) -> u32 {
        digit
    }
    fn everything(&self) -> Vec<u32> {
        self.0.to_vec()
    }
}
