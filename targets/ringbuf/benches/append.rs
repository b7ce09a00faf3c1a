//! Append throughput on a DRAM-backed region, against a raw memcpy into the region.
//!
//! The default run measures a representative subset: threads x committers for 4 KiB
//! bodies, and body size x alignment x access for one thread. `RINGBUF_BENCH_FULL=1` runs
//! the whole grid (threads 1, 2, 4, 8 x committers 1, 2, 4, 8 x bodies 256 B, 4 KiB,
//! 16 KiB x alignment 64, 256 x non-temporal, clwb).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use persim_ringbuf::{
    dispatch, AccessKind, AccessVisitor, AppendError, HeapRegion, PmAccess, RingBuf, Strategy,
};

const REGION_LEN: usize = 64 << 20;
const CHUNK_SIZE: usize = 1 << 20;
const BODY_LENS: [usize; 3] = [256, 4 << 10, 16 << 10];
const COUNTS: [usize; 4] = [1, 2, 4, 8];

/// A zeroed region whose pages are already mapped, so page faults stay out of the timing.
fn touched_region() -> HeapRegion {
    let mut region = HeapRegion::new(REGION_LEN);
    region.as_mut_slice().fill(0);
    region
}

struct Case<'g, 'c> {
    group: &'g mut BenchmarkGroup<'c, WallTime>,
    kind: AccessKind,
    align: usize,
    threads: usize,
    committers: usize,
    body_len: usize,
}

impl AccessVisitor for Case<'_, '_> {
    type Output = ();
    fn visit<A: PmAccess + 'static>(self, access: A) {
        match self.align {
            64 => self.run::<A, 64>(access),
            _ => self.run::<A, 256>(access),
        }
    }
}

impl Case<'_, '_> {
    fn run<A: PmAccess + 'static, const ALIGN: usize>(self, access: A) {
        let log =
            RingBuf::<_, _, ALIGN>::format(touched_region(), access, CHUNK_SIZE, self.committers)
                .expect("the benchmark geometry is valid");
        let body = vec![0x5a; self.body_len];
        let id = format!(
            "{}/align{}/{}B/t{}c{}",
            self.kind.name(),
            ALIGN,
            self.body_len,
            self.threads,
            self.committers
        );
        self.group.throughput(Throughput::Elements(1));
        self.group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for thread in 0..self.threads as u64 {
                        let share = iters / self.threads as u64
                            + u64::from(thread < iters % self.threads as u64);
                        let (log, body) = (&log, &body);
                        s.spawn(move || (0..share).for_each(|_| append(log, body)));
                    }
                });
                start.elapsed()
            })
        });
    }
}

/// Appends, reclaiming the log when it is full as a log user's cleaner would.
fn append<A: PmAccess, const ALIGN: usize>(log: &RingBuf<HeapRegion, A, ALIGN>, body: &[u8]) {
    loop {
        match log.append(body) {
            Ok(id) => {
                black_box(id);
                return;
            }
            Err(AppendError::LogFull { .. }) => {
                log.release(u64::MAX);
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn bench(c: &mut Criterion) {
    let full = std::env::var_os("RINGBUF_BENCH_FULL").is_some();
    let nt = AccessKind::detect(Strategy::NonTemporal).expect("SSE2 is part of x86-64");
    let flush = AccessKind::detect(Strategy::Flush).expect("clflush is part of x86-64");
    // (access, alignment, threads, committers, body length)
    let mut cases = Vec::new();
    if full {
        for kind in [nt, flush] {
            for align in [64, 256] {
                for body_len in BODY_LENS {
                    for threads in COUNTS {
                        for committers in COUNTS {
                            cases.push((kind, align, threads, committers, body_len));
                        }
                    }
                }
            }
        }
    } else {
        for threads in COUNTS {
            for committers in COUNTS {
                cases.push((nt, 256, threads, committers, 4 << 10));
            }
        }
        for kind in [nt, flush] {
            for align in [64, 256] {
                for body_len in BODY_LENS {
                    // The subsets share nt/256/4 KiB/1 thread/1 committer.
                    if !cases.contains(&(kind, align, 1, 1, body_len)) {
                        cases.push((kind, align, 1, 1, body_len));
                    }
                }
            }
        }
    }
    let mut group = c.benchmark_group("append");
    for (kind, align, threads, committers, body_len) in cases {
        let case = Case {
            group: &mut group,
            kind,
            align,
            threads,
            committers,
            body_len,
        };
        dispatch(kind, case).expect("detected kinds are supported");
    }
    group.finish();

    let mut group = c.benchmark_group("memcpy");
    let mut region = touched_region();
    for body_len in BODY_LENS {
        let body = vec![0x5a; body_len];
        let mut at = 0;
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("{body_len}B"), |b| {
            b.iter(|| {
                if at + body_len > REGION_LEN {
                    at = 0;
                }
                region.as_mut_slice()[at..at + body_len].copy_from_slice(black_box(&body));
                at += body_len;
            })
        });
    }
    group.finish();
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
