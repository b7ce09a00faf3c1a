//! Crash consistency of Pangolin's transactions, proved with Persim's crash model in
//! process.
//!
//! A run formats a small pool (one-page chunk rows, so objects cross rows), records the
//! trace of a few transactions with persim-ringbuf's `Tracing` access, each bracketed by
//! two checkpoints, and replays it through the crash model. Every crash image is opened as
//! after a restart (recovery) and must hold the objects of the state before or after the
//! transaction the crash interrupted, never a mix; every object must pass its checksum,
//! parity must match the data (a clean scrub), and the pool must take a new transaction.
//! The same holds when one copy of the redo log is lost as well.

mod common;

use std::fmt;

use common::{body, contents, format, small, verified, Contents};
use persim_crash_check::{assert_consistent, check_restarts, styles, Panicked, CACHES};
use persim_model::{CacheMode, CheckReport, FailurePoint, Strategy};
use persim_pangolin::{OpenError, Pool, ScrubReport, TxError, PAGE};
use persim_ringbuf::{Eadr, HeapRegion, TraceStyle, Tracing};
use persim_trace::Entry;

const STRATEGIES: [Strategy; 2] = [Strategy::Exhaustive, Strategy::GlobalPrefix];
/// Above this many images per failure point the model samples (seeded).
const MAX_IMAGES: usize = 512;

/// One change in a transaction; `pick` chooses among the objects allocated so far.
#[derive(Clone, Copy, Debug)]
enum Step {
    Alloc {
        size: u64,
        seed: u64,
    },
    Write {
        pick: usize,
        at: u64,
        len: u64,
        seed: u64,
    },
    Free {
        pick: usize,
    },
}

/// Allocations, writes to the root and to objects, a free and a reuse, and an object that
/// crosses a row.
fn scenario() -> Vec<Vec<Step>> {
    use Step::*;
    vec![
        vec![
            Alloc { size: 100, seed: 1 },
            Alloc { size: 300, seed: 2 },
            Write {
                pick: 0,
                at: 0,
                len: 8,
                seed: 3,
            },
        ],
        vec![
            Write {
                pick: 1,
                at: 10,
                len: 40,
                seed: 4,
            },
            Write {
                pick: 2,
                at: 200,
                len: 100,
                seed: 5,
            },
        ],
        vec![
            Free { pick: 1 },
            Alloc { size: 64, seed: 6 },
            Write {
                pick: 2,
                at: 0,
                len: 8,
                seed: 7,
            },
        ],
        vec![Alloc {
            size: 3000,
            seed: 8,
        }],
    ]
}

struct Run {
    initial: Vec<u8>,
    trace: Vec<Entry>,
    /// The objects before the first transaction and after each.
    states: Vec<Contents>,
}

fn record(style: TraceStyle, txs: &[Vec<Step>]) -> Run {
    let region = format(small()).into_region();
    let initial = region.as_slice().to_vec();
    let pool = Pool::open(region, Tracing::new(style, true)).unwrap();
    assert!(
        pool.access().take().is_empty(),
        "opening a clean pool writes nothing"
    );
    let mut live = vec![pool.root()];
    let mut states = vec![contents(&pool)];
    for steps in txs {
        let mut tx = pool.begin();
        for &step in steps {
            match step {
                Step::Alloc { size, seed } => {
                    let oid = tx.alloc(size, 1).unwrap();
                    tx.open(oid)
                        .unwrap()
                        .copy_from_slice(&body(seed, size as usize));
                    live.push(oid);
                }
                Step::Write {
                    pick,
                    at,
                    len,
                    seed,
                } => {
                    let range = tx.add_range(live[pick], at, len).unwrap();
                    range.copy_from_slice(&body(seed, len as usize));
                }
                Step::Free { pick } => tx.free(live[pick]).unwrap(),
            }
        }
        tx.commit().unwrap();
        states.push(contents(&pool));
    }
    Run {
        initial,
        trace: pool.access().take(),
        states,
    }
}

/// What a restart found wrong.
#[derive(Debug)]
enum Problem {
    Panicked,
    Open(OpenError),
    Mixed {
        point: FailurePoint,
        allowed: Vec<usize>,
    },
    Unverified(TxError),
    Scrub(ScrubReport),
    Unusable(TxError),
}

impl From<Panicked> for Problem {
    fn from(_: Panicked) -> Self {
        Problem::Panicked
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Panicked => write!(f, "the restart panicked"),
            Problem::Open(e) => write!(f, "open: {e}"),
            Problem::Mixed { point, allowed } => {
                write!(
                    f,
                    "at {point:?} the objects match none of states {allowed:?}"
                )
            }
            Problem::Unverified(e) => write!(f, "an object fails verification: {e}"),
            Problem::Scrub(report) => write!(f, "a scrub found damage: {report:?}"),
            Problem::Unusable(e) => write!(f, "a new transaction failed: {e}"),
        }
    }
}

/// The states a crash at `point` may leave: before the run, inside transaction k (checkpoint
/// 2k: before or after it), or after it (checkpoint 2k + 1).
fn allowed(point: FailurePoint) -> Vec<usize> {
    match point.checkpoint {
        None => vec![0],
        Some(c) if c % 2 == 0 => vec![c as usize / 2, c as usize / 2 + 1],
        Some(c) => vec![c as usize / 2 + 1],
    }
}

fn restart(
    run: &Run,
    point: FailurePoint,
    mut region: HeapRegion,
    lost_log: Option<usize>,
) -> Result<(), Problem> {
    if let Some(copy) = lost_log {
        let (geometry, _) = small();
        let at = (2 * PAGE + copy as u64 * geometry.log_size) as usize;
        region.as_mut_slice()[at..at + geometry.log_size as usize].fill(0);
    }
    let mut pool = Pool::open(region, Eadr).map_err(Problem::Open)?;
    let found = contents(&pool);
    let allowed = allowed(point);
    if !allowed.iter().any(|&k| run.states[k] == found) {
        return Err(Problem::Mixed { point, allowed });
    }
    if verified(&mut pool).map_err(Problem::Unverified)? != found || pool.repairs() > 0 {
        return Err(Problem::Unverified(TxError::Unrepairable(0)));
    }
    let report = pool.scrub();
    if !report.is_clean() {
        return Err(Problem::Scrub(report));
    }
    let mut tx = pool.begin();
    let oid = tx.alloc(8, 2).map_err(Problem::Unusable)?;
    tx.open(oid).map_err(Problem::Unusable)?.fill(0xee);
    tx.commit().map_err(Problem::Unusable)?;
    let pool = Pool::open(pool.into_region(), Eadr).map_err(Problem::Open)?;
    match pool.get(oid) {
        Ok(data) if data == [0xee; 8] => Ok(()),
        other => Err(Problem::Unusable(
            other.err().unwrap_or(TxError::BadObject(oid)),
        )),
    }
}

fn check(
    run: &Run,
    cache: CacheMode,
    strategy: Strategy,
    lost_log: Option<usize>,
) -> CheckReport<Problem> {
    check_restarts(
        &run.initial,
        &run.trace,
        cache,
        strategy,
        MAX_IMAGES,
        |point, region| restart(run, point, region, lost_log),
    )
}

fn assert_crash_consistent(lost_log: Option<usize>) {
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record(style, &scenario());
            for strategy in STRATEGIES {
                let report = check(&run, cache, strategy, lost_log);
                let what =
                    format!("{style:?}, {cache} caches, {strategy}, log copy lost: {lost_log:?}");
                assert_consistent(&report, &what);
            }
        }
    }
}

#[test]
fn every_crash_of_every_transaction_recovers_to_before_or_after_it() {
    assert_crash_consistent(None);
}

#[test]
fn a_crash_and_a_lost_log_copy_still_recover_to_before_or_after() {
    for copy in 0..2 {
        assert_crash_consistent(Some(copy));
    }
}

#[test]
fn the_run_does_what_the_scenario_says() {
    let run = record(TraceStyle::NonTemporal, &scenario());
    let sizes: Vec<Vec<usize>> = run
        .states
        .iter()
        .map(|s| s.values().map(Vec::len).collect())
        .collect();
    assert_eq!(
        sizes,
        [
            vec![64],
            vec![64, 100, 300],
            vec![64, 100, 300],
            vec![64, 300, 64],
            vec![64, 300, 64, 3000]
        ]
    );
    assert!(
        run.states.windows(2).all(|w| w[0] != w[1]),
        "every transaction changes the objects"
    );
}
