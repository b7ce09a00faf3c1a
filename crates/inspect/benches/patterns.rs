//! `persim analyze` throughput on 1 M synthetic file-system-like entries, in memory
//! (target: >= 10 M entries/s; reading a binary trace from disk adds its decoding), and on
//! the same entries in libpmemobj transactions of an application (PMDK's rules at work).
//! Run: cargo bench -p persim-analyze --bench patterns -- --warm-up-time 1 --measurement-time 3

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use persim_inspect::find_patterns;
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
    let pmdk = in_transactions(&entries);
    group.throughput(Throughput::Elements(pmdk.len() as u64));
    group.bench_function("volatile_pmdk_rules", |b| {
        b.iter(|| {
            let found = find_patterns(
                pmdk.iter().map(Ok::<_, TraceError>),
                CacheMode::Volatile,
                None,
            );
            black_box(found.unwrap().entries)
        })
    });
    group.finish();
}

/// Every 64 entries a transaction of the application's: begun, an add, an allocation and
/// its return, a free of the previous one, committed; its stores (user pcs) go to the
/// added range and the new object, so every rule judges every one of them.
fn in_transactions(entries: &[Entry]) -> Vec<Entry> {
    let line = |text: String| text.parse::<Entry>().unwrap();
    let mut out = Vec::with_capacity(entries.len() * 2);
    for (i, chunk) in entries.chunks(64).enumerate() {
        let object = 0x10_0000 + (i as u64 % 1024) * 0x40;
        let previous = 0x10_0000 + ((i as u64 + 1023) % 1024) * 0x40;
        let site = "@ pc=0x7f0000 stack=0x401000";
        for text in [
            format!("call pmemobj_tx_begin pm:0x0 0x0 {site}"),
            format!("call pmemobj_tx_add_range_direct pm:0x8000 0x40 {site}"),
            format!("call pmemobj_tx_alloc 0x40 0x1 {site}"),
            format!("return pmemobj_tx_alloc pm:{object:#x} @ pc=0x401000"),
            format!("call pmemobj_tx_free 0x1 pm:{previous:#x} {site}"),
        ] {
            out.push(line(text));
        }
        for (j, e) in chunk.iter().enumerate() {
            out.push(e.clone());
            let at = if j % 2 == 0 { 0x8000 } else { object } + (j as u64 % 8) * 8;
            out.push(line(format!(
                "write {at:#x} 0100000000000000 @ pc=0x401010"
            )));
        }
        for text in ["call pmemobj_tx_commit", "call pmemobj_tx_end"] {
            out.push(line(format!("{text} {site}")));
        }
    }
    out
}

criterion_group!(benches, bench);
criterion_main!(benches);
