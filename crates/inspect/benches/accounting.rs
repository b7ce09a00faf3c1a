//! `persim profile --by process|function` and `--sample-interval` throughput on 1 M
//! synthetic file-system-like entries of six threads, in memory (target: >= 10 M
//! entries/s; reading a binary trace adds its decoding, on a thread of its own).
//! Run: cargo bench -p persim-analyze --bench accounting -- --warm-up-time 1 --measurement-time 3
//! Times are the bench thread's CPU time, not wall time: the machine is shared, and a
//! thread waiting for a CPU is not slower code.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use persim_inspect::{account, By};
use persim_trace::synthetic::FsLike;
use persim_trace::{Entry, TraceError};
use std::hint::black_box;
use std::time::Duration;

const ENTRIES: usize = 1_000_000;

fn bench(c: &mut Criterion) {
    let entries: Vec<Entry> = FsLike::new(1, true).with_tasks(6).take(ENTRIES).collect();
    let mut group = c.benchmark_group("accounting_1M_fs_like");
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.sample_size(10);
    let runs: [(&str, Option<By>, Option<u64>); 3] = [
        ("by_process", Some(By::Process), None),
        ("by_function", Some(By::Function), None),
        ("sample_interval", None, Some(10007)),
    ];
    for (name, by, interval) in runs {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = thread_cpu_time();
                for _ in 0..iters {
                    let entries = entries.iter().map(Ok::<_, TraceError>);
                    let a = account(entries, true, by, interval, None);
                    black_box(a.unwrap().entries);
                }
                thread_cpu_time() - start
            })
        });
    }
    group.finish();
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

criterion_group!(benches, bench);
criterion_main!(benches);
