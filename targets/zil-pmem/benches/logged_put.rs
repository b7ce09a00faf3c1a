//! Latency of a 4 KiB logged put on a DRAM-backed region (the stand-in for PM) with 1 to 4
//! committers, one thread per committer, against the key-value consumer's txg commit of one
//! 4 KiB put (records written, fsync, commit record, fsync) in a file under the target
//! directory (`ZIL_BENCH_DIR` to put it elsewhere, e.g. on the NVMe SSD).
//!
//! Criterion measures the mean time of each; a second pass times single operations and
//! prints their median and 99th percentile, and the ratio of the txg commit's median to
//! the logged put's (docs/results/performance.md).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use persim_ringbuf::{dispatch, AccessKind, AccessVisitor, Eadr, HeapRegion, PmAccess, Strategy};
use persim_zil_pmem::kv::KvStore;
use persim_zil_pmem::{AppendError, LogHeader, ZilPmem};

const REGION_LEN: usize = 64 << 20;
const CHUNK_SIZE: usize = 1 << 20;
const BODY_LEN: usize = 4 << 10;
/// Single operations timed per case in the percentile pass.
const SAMPLES: usize = 20_000;
const COMMIT_SAMPLES: usize = 300;

/// A log over a region whose pages are already mapped, so page faults stay out of the
/// timing, claimed and ready for appends.
fn ready_log<A: PmAccess>(access: A, committers: usize) -> ZilPmem<HeapRegion, A> {
    let mut region = HeapRegion::new(REGION_LEN);
    region.as_mut_slice().fill(0);
    let mut log = ZilPmem::format(region, access, CHUNK_SIZE, committers).expect("geometry");
    let claim = log.claim(&LogHeader::new(1, 2), 1).expect("claimed once");
    log.replay(&claim, |_, _| Ok::<(), ()>(())).expect("empty");
    log
}

/// One put: a new generation in the current txg; a full log syncs the txg, as the
/// consumer would.
fn put<A: PmAccess>(log: &ZilPmem<HeapRegion, A>, txg: &AtomicU64, body: &[u8]) {
    loop {
        match log.append(1, txg.load(Ordering::Relaxed), body, true) {
            Ok(position) => {
                black_box(position);
                return;
            }
            Err(AppendError::LogFull) => log.txg_synced(txg.fetch_add(1, Ordering::Relaxed)),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Runs `threads` threads of `share` puts each; returns every put's latency.
fn timed_puts<A: PmAccess>(
    log: &ZilPmem<HeapRegion, A>,
    threads: usize,
    share: usize,
) -> Vec<Duration> {
    let txg = AtomicU64::new(1);
    let body = vec![0x5a; BODY_LEN];
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (txg, body) = (&txg, &body);
                s.spawn(move || {
                    (0..share)
                        .map(|_| {
                            let start = Instant::now();
                            put(log, txg, body);
                            start.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("no panic"))
            .collect()
    })
}

struct Case<'c> {
    criterion: &'c mut Criterion,
    committers: usize,
}

impl AccessVisitor for Case<'_> {
    /// (median, p99) of one put.
    type Output = (Duration, Duration);
    fn visit<A: PmAccess + 'static>(self, access: A) -> (Duration, Duration) {
        let log = ready_log(access, self.committers);
        let threads = self.committers;
        self.criterion
            .bench_function(&format!("logged_put/4KiB/c{threads}"), |b| {
                b.iter_custom(|iters| {
                    let share = (iters as usize).div_ceil(threads);
                    let start = Instant::now();
                    timed_puts(&log, threads, share);
                    start.elapsed() / threads as u32
                })
            });
        percentiles(timed_puts(&log, threads, SAMPLES / threads))
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

fn store_dir() -> PathBuf {
    std::env::var_os("ZIL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

fn bench(c: &mut Criterion) {
    let kind = AccessKind::detect(Strategy::NonTemporal).expect("SSE2 is part of x86-64");
    let mut put_latency = Vec::new();
    for committers in 1..=4 {
        let case = Case {
            criterion: c,
            committers,
        };
        put_latency.push((committers, dispatch(kind, case).expect("detected")));
    }

    let dir = tempfile::tempdir_in(store_dir()).expect("a directory for the store");
    let region = HeapRegion::new(REGION_LEN);
    let mut store = KvStore::create(
        &dir.path().join("store"),
        region,
        Eadr,
        CHUNK_SIZE,
        usize::MAX,
        (1, 2),
    )
    .expect("store");
    let value = vec![0x5a; BODY_LEN - 16];
    let mut key = 0u64;
    let mut commit = |store: &mut KvStore<HeapRegion, Eadr>| {
        key += 1;
        store.put(&key.to_le_bytes(), &value).expect("put");
        let start = Instant::now();
        store.commit_txg().expect("commit");
        start.elapsed()
    };
    c.bench_function("txg_commit/4KiB", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| commit(&mut store)).sum())
    });
    let (commit_median, commit_p99) =
        percentiles((0..COMMIT_SAMPLES).map(|_| commit(&mut store)).collect());

    println!(
        "\n4 KiB logged put ({}, DRAM) against the txg commit (fsync) in {}:",
        kind.name(),
        store_dir().display()
    );
    println!("txg commit: median {commit_median:?}, p99 {commit_p99:?}");
    for (committers, (median, p99)) in put_latency {
        println!(
            "{committers} committer(s): median {median:?}, p99 {p99:?}; \
             txg commit / put (medians) = {:.0}",
            commit_median.as_secs_f64() / median.as_secs_f64()
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = bench
}
criterion_main!(benches);
