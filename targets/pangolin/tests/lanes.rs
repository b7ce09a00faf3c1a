//! Crash consistency of commits on several lanes at once, proved with Persim's crash model
//! in process: three threads each update their own object (one also allocates), the three
//! objects in one page column so that their parity is the same bytes, and every thread
//! waits after its commit mark until all three are marked, so that every lane is
//! committed before any writes back. Every crash image, opened as after a restart, must
//! hold each thread's objects as before or after its transaction (lanes commit
//! independently), pass every checksum, and scrub clean: recovery replays every committed
//! lane and recomputes the parity they share.

mod common;

use std::cell::Cell;
use std::fmt;
use std::sync::Barrier;

use common::{body, contents, verified, Contents};
use persim_crash_check::{assert_consistent, check_restarts, styles, Panicked, CACHES};
use persim_model::{FailurePoint, Strategy};
use persim_pangolin::{Geometry, PmAccess, Pool, PAGE};
use persim_ringbuf::{Eadr, HeapRegion, TraceStyle, Tracing};
use persim_trace::Entry;

const THREADS: usize = 3;
/// An object a row less its header: consecutive ones share every page column.
const OBJECT: u64 = PAGE - 16;

/// A tracing access at which each thread's second fence (the one after its commit mark)
/// waits for every thread's.
struct Gate {
    tracing: Tracing,
    marked: Barrier,
}

thread_local! {
    static FENCES: Cell<u32> = const { Cell::new(0) };
}

impl PmAccess for Gate {
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: forwarded from our caller.
        unsafe { self.tracing.store(base, offset, src) }
    }

    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: forwarded from our caller.
        unsafe { self.tracing.store_part(base, offset, src) }
    }

    unsafe fn xor_part(&self, base: *mut u8, offset: usize, mask: &[u8]) {
        // SAFETY: forwarded from our caller.
        unsafe { self.tracing.xor_part(base, offset, mask) }
    }

    fn fence(&self) {
        self.tracing.fence();
        FENCES.set(FENCES.get() + 1);
        if FENCES.get() == 2 {
            self.marked.wait();
        }
    }
}

fn geometry() -> (Geometry, usize) {
    let geometry = Geometry {
        pool_len: 0,
        chunk_size: PAGE,
        rows: 5,
        log_size: PAGE,
        lanes: THREADS as u64,
    };
    // Metadata, 3 lanes of two one-page copies, a zone of 5 rows.
    (geometry, (2 + 2 * THREADS + 5) * PAGE as usize)
}

struct Run {
    initial: Vec<u8>,
    trace: Vec<Entry>,
    /// Per thread, its objects before and after its transaction.
    states: Vec<[Contents; 2]>,
}

fn record(style: TraceStyle) -> Run {
    let (geometry, len) = geometry();
    let pool = Pool::format(HeapRegion::new(len), Eadr, geometry, 0).unwrap();
    let mut tx = pool.begin();
    let oids: Vec<u64> = (0..THREADS).map(|_| tx.alloc(OBJECT, 1).unwrap()).collect();
    tx.commit().unwrap();
    let region = pool.into_region();
    let initial = region.as_slice().to_vec();
    let gate = Gate {
        tracing: Tracing::new(style, false),
        marked: Barrier::new(THREADS),
    };
    let pool = Pool::open(region, gate).unwrap();
    let before = contents(&pool);
    let added: Vec<Option<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = oids
            .iter()
            .enumerate()
            .map(|(t, &oid)| {
                let pool = &pool;
                s.spawn(move || {
                    let mut tx = pool.begin();
                    // Small changes (atomic XOR) and, in thread 0, a large one (the lock).
                    let len = if t == 0 { 1024 } else { 40 };
                    let range = tx.add_range(oid, 100 + 8 * t as u64, len).unwrap();
                    range.copy_from_slice(&body(t as u64 + 1, len as usize));
                    let added = (t == 1).then(|| {
                        let new = tx.alloc(100, 2).unwrap();
                        tx.open(new).unwrap().copy_from_slice(&body(9, 100));
                        new
                    });
                    tx.commit().unwrap();
                    added
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let after = contents(&pool);
    let states = (0..THREADS)
        .map(|t| {
            let mine = |all: &Contents| -> Contents {
                all.iter()
                    .filter(|(oid, _)| **oid == oids[t] || Some(**oid) == added[t])
                    .map(|(oid, data)| (*oid, data.clone()))
                    .collect()
            };
            [mine(&before), mine(&after)]
        })
        .collect();
    Run {
        initial,
        trace: pool.access().tracing.take(),
        states,
    }
}

#[derive(Debug)]
enum Problem {
    Panicked,
    Failed(String),
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
            Problem::Failed(what) => write!(f, "{what}"),
        }
    }
}

fn restart(run: &Run, point: FailurePoint, region: HeapRegion) -> Result<(), Problem> {
    let fail = |what: String| Problem::Failed(format!("at {point:?}: {what}"));
    let mut pool = Pool::open(region, Eadr).map_err(|e| fail(format!("open: {e}")))?;
    let found = contents(&pool);
    for (t, [before, after]) in run.states.iter().enumerate() {
        let mine: Contents = found
            .iter()
            .filter(|(oid, _)| before.contains_key(oid) || after.contains_key(oid))
            .map(|(oid, data)| (*oid, data.clone()))
            .collect();
        if mine != *before && mine != *after {
            return Err(fail(format!(
                "thread {t}'s objects are neither before nor after"
            )));
        }
    }
    let checked = verified(&mut pool).map_err(|e| fail(format!("verification: {e}")))?;
    if checked != found || pool.repairs() > 0 {
        return Err(fail("an object needed a repair".into()));
    }
    let report = pool.scrub();
    if !report.is_clean() {
        return Err(fail(format!("a scrub found damage: {report:?}")));
    }
    Ok(())
}

#[test]
fn crashes_with_several_lanes_committed_recover_each_to_before_or_after() {
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record(style);
            assert!(
                run.states.iter().all(|[before, after]| before != after),
                "every thread changes its objects"
            );
            for strategy in [Strategy::Exhaustive, Strategy::GlobalPrefix] {
                let report = check_restarts(
                    &run.initial,
                    &run.trace,
                    cache,
                    strategy,
                    512,
                    |point, region| restart(&run, point, region),
                );
                assert_consistent(&report, &format!("{style:?}, {cache} caches, {strategy}"));
            }
        }
    }
}
