//! A brute-force reference enumerator written straight from docs/design/model.md, and property tests
//! comparing every strategy with it on random small traces.

use persim_model::{
    replay_in_memory, replay_in_memory_guided, CacheMode, Config, FailureKind, Strategy,
};
use persim_trace::{Entry, FenceKind, FlushKind, Hypercall, Op};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use std::collections::{BTreeMap, BTreeSet};

const PM: u64 = 192;
const BLK: u64 = 1024;

/// One atomic piece of a store, as (address, bytes), and whether it was non-temporal.
#[derive(Clone, Debug)]
struct RefUnit {
    addr: u64,
    bytes: Vec<u8>,
    nt: bool,
    order: usize,
}

/// The model's state, kept as literally as docs/design/model.md states it.
#[derive(Clone, Default)]
struct RefState {
    persisted: Vec<u8>,
    seqs: BTreeMap<u64, Vec<RefUnit>>,
    marks: BTreeMap<u64, usize>,
    blocks: BTreeMap<u64, Vec<Vec<u8>>>,
    stores: usize,
}

type ImageSet = BTreeSet<Vec<u8>>;

impl RefState {
    fn new() -> Self {
        RefState {
            persisted: vec![0; (PM + BLK) as usize],
            ..Default::default()
        }
    }

    fn apply(&mut self, op: &Op, mode: CacheMode) {
        match op {
            Op::Write { addr, data, nt } => {
                // split at 8-byte words
                let mut a = *addr;
                let mut rest = &data[..];
                while !rest.is_empty() {
                    let n = ((8 - a % 8) as usize).min(rest.len());
                    self.stores += 1;
                    self.seqs.entry(a / 64 * 64).or_default().push(RefUnit {
                        addr: a,
                        bytes: rest[..n].to_vec(),
                        nt: *nt,
                        order: self.stores,
                    });
                    a += n as u64;
                    rest = &rest[n..];
                }
            }
            Op::Flush { addr, .. } if mode == CacheMode::Volatile => {
                let line = addr / 64 * 64;
                let len = self.seqs.get(&line).map_or(0, |s| s.len());
                self.marks.insert(line, len);
            }
            Op::Fence(_) => {
                let lines: Vec<u64> = self.seqs.keys().copied().collect();
                for line in lines {
                    let seq = self.seqs.get_mut(&line).unwrap();
                    let g = match mode {
                        CacheMode::Persistent => seq.len(),
                        CacheMode::Volatile => {
                            let f = self.marks.get(&line).copied().unwrap_or(0);
                            let nt = seq.iter().rposition(|u| u.nt).map_or(0, |i| i + 1);
                            f.max(nt)
                        }
                    };
                    let durable: Vec<RefUnit> = seq.drain(..g).collect();
                    for u in durable {
                        put(&mut self.persisted, u.addr, &u.bytes);
                    }
                }
                self.marks.clear();
            }
            Op::BlkWrite { offset, data } => {
                for (i, b) in data.chunks(512).enumerate() {
                    self.blocks
                        .entry(offset / 512 + i as u64)
                        .or_default()
                        .push(b.to_vec());
                }
            }
            Op::BlkFlush => {
                for (block, writes) in std::mem::take(&mut self.blocks) {
                    put(
                        &mut self.persisted,
                        PM + block * 512,
                        writes.last().unwrap(),
                    );
                }
            }
            _ => {}
        }
    }

    /// Every choice of per-line prefix lengths allowed in `mode`.
    fn pm_choices(&self, mode: CacheMode) -> Vec<Vec<usize>> {
        let seqs: Vec<&Vec<RefUnit>> = self.seqs.values().collect();
        let all = product(&seqs.iter().map(|s| s.len() + 1).collect::<Vec<_>>());
        match mode {
            CacheMode::Volatile => all,
            CacheMode::Persistent => {
                // the cut t may be any cached-unit order value (or 0): keep the choices that
                // take exactly the cached units with order <= t
                let mut cuts: Vec<usize> = seqs
                    .iter()
                    .flat_map(|s| s.iter())
                    .filter(|u| !u.nt)
                    .map(|u| u.order)
                    .collect();
                cuts.push(0);
                all.into_iter()
                    .filter(|k| {
                        cuts.iter().any(|&t| {
                            seqs.iter().zip(k).all(|(s, &k)| {
                                s.iter()
                                    .enumerate()
                                    .filter(|(_, u)| !u.nt)
                                    .all(|(i, u)| (i < k) == (u.order <= t))
                            })
                        })
                    })
                    .collect()
            }
        }
    }

    fn image(&self, pm: &[usize], blk: &[usize]) -> Vec<u8> {
        let mut img = self.persisted.clone();
        for (seq, &k) in self.seqs.values().zip(pm) {
            for u in &seq[..k] {
                put(&mut img, u.addr, &u.bytes);
            }
        }
        for ((block, writes), &n) in self.blocks.iter().zip(blk) {
            if n > 0 {
                put(&mut img, PM + block * 512, &writes[n - 1]);
            }
        }
        img
    }

    /// The exact set at a failure point of `kind` (docs/design/model.md, including the PM+block rule).
    fn exact_set(&self, mode: CacheMode, kind: FailureKind) -> ImageSet {
        let pm_all: Vec<usize> = self.seqs.values().map(|s| s.len()).collect();
        let blk_all: Vec<usize> = self.blocks.values().map(|w| w.len()).collect();
        let ends = |all: &Vec<usize>| vec![vec![0; all.len()], all.clone()];
        let (pm, blk) = if kind == FailureKind::Blkflush {
            (
                ends(&pm_all),
                product(&blk_all.iter().map(|n| n + 1).collect::<Vec<_>>()),
            )
        } else {
            (self.pm_choices(mode), ends(&blk_all))
        };
        pm.iter()
            .flat_map(|p| blk.iter().map(move |b| self.image(p, b)))
            .collect()
    }
}

fn put(img: &mut [u8], addr: u64, bytes: &[u8]) {
    img[addr as usize..addr as usize + bytes.len()].copy_from_slice(bytes);
}

fn product(radices: &[usize]) -> Vec<Vec<usize>> {
    radices.iter().fold(vec![vec![]], |acc, &r| {
        acc.into_iter()
            .flat_map(|prefix| (0..r).map(move |d| [prefix.clone(), vec![d]].concat()))
            .collect()
    })
}

/// The reference state just before each entry index.
fn states(entries: &[Entry], mode: CacheMode) -> Vec<RefState> {
    let mut s = RefState::new();
    let mut out = vec![s.clone()];
    for e in entries {
        s.apply(&e.op, mode);
        out.push(s.clone());
    }
    out
}

fn config(mode: CacheMode, strategy: Strategy, max_images: usize) -> Config {
    let mut c = Config::new(PM);
    c.blk_size = BLK;
    c.cache = mode;
    c.strategy = strategy;
    c.max_images = max_images;
    c
}

/// Checks one strategy against the reference at every failure point.
fn check(entries: &[Entry], mode: CacheMode, strategy: Strategy) -> Result<(), TestCaseError> {
    let points = replay_in_memory(
        config(mode, strategy, 1 << 20),
        vec![0; (PM + BLK) as usize],
        entries,
    )
    .unwrap();
    let refs = states(entries, mode);
    let expected_points: Vec<(u64, FailureKind)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let kind = match e.op {
                Op::Fence(_) => FailureKind::Fence,
                Op::Hypercall(Hypercall::Checkpoint(_)) => FailureKind::Checkpoint,
                Op::BlkFlush => FailureKind::Blkflush,
                // fast skips repeated code locations; these entries carry none
                Op::Flush { .. } if matches!(strategy, Strategy::ProgramOrder | Strategy::Fast) => {
                    FailureKind::Flush
                }
                _ => return None,
            };
            Some((i as u64, kind))
        })
        .chain([(entries.len() as u64, FailureKind::End)])
        .collect();
    let got_points: Vec<(u64, FailureKind)> = points
        .iter()
        .map(|p| (p.point.index, p.point.kind))
        .collect();
    prop_assert_eq!(got_points, expected_points);
    for p in &points {
        let exact = refs[p.point.index as usize].exact_set(mode, p.point.kind);
        let got: ImageSet = p.images.iter().map(|(img, _, _)| img.clone()).collect();
        prop_assert!(!p.incomplete);
        prop_assert!(
            got.is_subset(&exact),
            "{:?} produced an image outside the model's set at {:?}",
            strategy,
            p.point
        );
        if strategy == Strategy::Exhaustive {
            prop_assert_eq!(
                got.len(),
                exact.len(),
                "exhaustive missed images at {:?}",
                p.point
            );
        }
    }
    Ok(())
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    prop_oneof![
        6 => (0..PM - 1, 1..20usize, any::<bool>(), any::<u8>()).prop_map(|(addr, len, nt, b)| {
            let len = len.min((PM - addr) as usize);
            Op::Write { addr, data: (0..len as u8).map(|i| b.wrapping_add(i) | 1).collect(), nt }
        }),
        3 => (0..PM).prop_map(|addr| Op::Flush { kind: FlushKind::Clwb, addr }),
        2 => Just(Op::Fence(FenceKind::Sfence)),
        1 => (0..4u64).prop_map(|n| Op::Hypercall(Hypercall::Checkpoint(n))),
        1 => (0..PM - 1, 1..100u64).prop_map(|(addr, len)| {
            Op::Hypercall(Hypercall::Volatile { addr, len: len.min(PM - addr) })
        }),
        1 => (0..2u64, 1..3u64, any::<u8>()).prop_map(|(block, n, b)| {
            let n = n.min(2 - block);
            Op::BlkWrite { offset: block * 512, data: vec![b | 1; (n * 512) as usize] }
        }),
        1 => Just(Op::BlkFlush),
    ]
}

/// With a small cap, every strategy samples: still only images of the exact set, at most
/// the cap (but never fewer than nothing/everything on both the PM and the block side),
/// and exhaustive is flagged incomplete whenever it misses images.
fn check_sampled(
    entries: &[Entry],
    mode: CacheMode,
    strategy: Strategy,
    cap: usize,
) -> Result<(), TestCaseError> {
    let points = replay_in_memory(
        config(mode, strategy, cap),
        vec![0; (PM + BLK) as usize],
        entries,
    )
    .unwrap();
    let refs = states(entries, mode);
    for p in &points {
        let exact = refs[p.point.index as usize].exact_set(mode, p.point.kind);
        let got: ImageSet = p.images.iter().map(|(img, _, _)| img.clone()).collect();
        prop_assert!(
            got.is_subset(&exact),
            "{:?} sampled an image outside the model's set at {:?}",
            strategy,
            p.point
        );
        prop_assert!(
            p.images.len() <= cap.max(4),
            "{} images above the cap {}",
            p.images.len(),
            cap
        );
        if strategy == Strategy::Exhaustive && !p.incomplete {
            prop_assert_eq!(got.len(), exact.len());
        }
    }
    Ok(())
}

/// A stand-in recovery's read set: the words whose first byte's parity, salted, is set, so
/// equal images read the same words and different images mostly different ones.
fn some_words_read(image: &[u8], salt: u8) -> Option<Vec<u64>> {
    let words = (0..PM / 8).map(|w| w * 8);
    Some(
        words
            .filter(|&w| (image[w as usize] ^ salt ^ (w / 8) as u8) & 1 == 1)
            .collect(),
    )
}

/// `reads` with any read sets, with or without NT prefixes, stays inside the exact set;
/// reading every line gives `global-prefix`'s images when no store is NT (NT units go
/// all or nothing otherwise), reading none only "nothing" and "everything".
fn check_reads(entries: &[Entry], mode: CacheMode, salt: u8) -> Result<(), TestCaseError> {
    let initial = || vec![0; (PM + BLK) as usize];
    let reads = config(mode, Strategy::Reads, 1 << 20);
    let refs = states(entries, mode);
    for nt_prefixes in [false, true] {
        let mut config = reads.clone();
        config.nt_prefixes = nt_prefixes;
        let guided = replay_in_memory_guided(config, initial(), entries, &mut |image: &[u8]| {
            some_words_read(image, salt)
        })
        .unwrap();
        for p in &guided {
            let exact = refs[p.point.index as usize].exact_set(mode, p.point.kind);
            let got: ImageSet = p.images.iter().map(|(img, _, _)| img.clone()).collect();
            prop_assert!(got.is_subset(&exact), "reads left the set at {:?}", p.point);
            let explored = p.explored.as_ref().unwrap();
            for line in &explored.from_previous {
                prop_assert!(explored.explored.contains(line));
            }
        }
    }
    let set = |p: &persim_model::PointImages| -> ImageSet {
        p.images.iter().map(|(img, _, _)| img.clone()).collect()
    };
    let no_nt = entries
        .iter()
        .all(|e| !matches!(e.op, Op::Write { nt: true, .. }));
    if no_nt {
        let global = replay_in_memory(
            config(mode, Strategy::GlobalPrefix, 1 << 20),
            initial(),
            entries,
        )
        .unwrap();
        let every_word = &mut |_: &[u8]| Some((0..PM / 8).map(|w| w * 8).collect());
        let all = replay_in_memory_guided(reads.clone(), initial(), entries, every_word).unwrap();
        for (g, a) in global.iter().zip(&all) {
            prop_assert!(
                set(g) == set(a),
                "reading every line is global-prefix at {:?}",
                g.point
            );
        }
    }
    let none = replay_in_memory_guided(reads, initial(), entries, &mut |_: &[u8]| Some(Vec::new()))
        .unwrap();
    for n in &none {
        let ends = refs[n.point.index as usize].exact_set(mode, FailureKind::End);
        prop_assert!(n.images.len() <= 4 && set(n).is_subset(&ends));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn reads_stays_in_the_model_set(ops in prop::collection::vec(op(), 0..12), salt in any::<u8>()) {
        let entries: Vec<Entry> = ops.into_iter().map(Entry::from).collect();
        for mode in [CacheMode::Volatile, CacheMode::Persistent] {
            check_reads(&entries, mode, salt)?;
        }
    }

    #[test]
    fn samples_stay_in_the_model_set(ops in prop::collection::vec(op(), 0..12), cap in 2..6usize) {
        let entries: Vec<Entry> = ops.into_iter().map(Entry::from).collect();
        for mode in [CacheMode::Volatile, CacheMode::Persistent] {
            for strategy in [Strategy::Exhaustive, Strategy::GlobalPrefix, Strategy::SingleLine] {
                check_sampled(&entries, mode, strategy, cap)?;
            }
        }
    }

    #[test]
    fn strategies_agree_with_the_reference(ops in prop::collection::vec(op(), 0..10)) {
        let entries: Vec<Entry> = ops.into_iter().map(Entry::from).collect();
        for mode in [CacheMode::Volatile, CacheMode::Persistent] {
            for strategy in [
                Strategy::Exhaustive,
                Strategy::GlobalPrefix,
                Strategy::ProgramOrder,
                Strategy::Fast,
                Strategy::SingleLine,
            ] {
                check(&entries, mode, strategy)?;
            }
        }
    }
}
