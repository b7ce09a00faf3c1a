//! `persim analyze` throughput on 1 M synthetic file-system-like entries, in memory
//! (target: >= 10 M entries/s; reading a binary trace from disk adds its decoding).
//! Run: cargo bench -p persim-analyze --bench patterns -- --warm-up-time 1 --measurement-time 3

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use persim_analyze::find_patterns;
use persim_model::CacheMode;
use persim_trace::synthetic::FsLike;
use persim_trace::{Entry, TraceError};
use std::hint::black_box;

const ENTRIES: usize = 1_000_000;

fn bench(c: &mut Criterion) {
    let entries: Vec<Entry> = FsLike::new(1, true).take(ENTRIES).collect();
    let mut group = c.benchmark_group("patterns_1M_fs_like");
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.sample_size(10);
    for cache in [CacheMode::Volatile, CacheMode::Persistent] {
        group.bench_function(format!("{cache}"), |b| {
            b.iter(|| {
                let found = find_patterns(entries.iter().map(Ok::<_, TraceError>), cache, None);
                black_box(found.unwrap().entries)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
