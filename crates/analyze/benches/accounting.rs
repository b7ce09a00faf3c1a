//! `persim profile --by process|function` and `--sample-interval` throughput on 1 M
//! synthetic file-system-like entries of six threads, in memory (target: >= 10 M
//! entries/s; reading a binary trace adds its decoding, on a thread of its own).
//! Run: cargo bench -p persim-analyze --bench accounting -- --warm-up-time 1 --measurement-time 3

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use persim_analyze::{account, By};
use persim_trace::synthetic::FsLike;
use persim_trace::{Entry, TraceError};
use std::hint::black_box;

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
            b.iter(|| {
                let entries = entries.iter().map(Ok::<_, TraceError>);
                let a = account(entries, true, by, interval, None);
                black_box(a.unwrap().entries)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
