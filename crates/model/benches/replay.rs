//! Replay throughput on 1 M synthetic file-system-like entries (target: >= 5 M entries/s).
//! Run: cargo bench -p persim-model --bench replay -- --warm-up-time 1 --measurement-time 3

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use persim_model::{CacheMode, Config, FailureView, Replay, Sink, Strategy};
use persim_trace::synthetic::{FsLike, PM_SIZE};
use persim_trace::Entry;
use std::hint::black_box;
use std::io;

const ENTRIES: usize = 1_000_000;

/// Counts what replay hands out; `choose` also runs the strategy at every failure point.
struct Counting {
    choose: bool,
    persisted: u64,
    images: u64,
}

impl Sink for Counting {
    fn persist(&mut self, _: u64, bytes: &[u8]) -> io::Result<()> {
        self.persisted += bytes.len() as u64;
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        if self.choose {
            self.images += view.crash_images().images.len() as u64;
        }
        Ok(())
    }
}

fn replay(entries: &[Entry], cache: CacheMode, strategy: Option<Strategy>) -> u64 {
    let mut config = Config::new(PM_SIZE);
    config.cache = cache;
    config.strategy = strategy.unwrap_or(Strategy::Exhaustive);
    let mut sink = Counting {
        choose: strategy.is_some(),
        persisted: 0,
        images: 0,
    };
    let mut replay = Replay::new(config);
    for e in entries {
        replay.step(e, &mut sink).unwrap();
    }
    replay.finish(&mut sink).unwrap();
    black_box(sink.persisted + sink.images)
}

fn bench(c: &mut Criterion) {
    let entries: Vec<Entry> = FsLike::new(1, false).take(ENTRIES).collect();
    let mut group = c.benchmark_group("replay_1M_fs_like");
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.sample_size(10);
    for cache in [CacheMode::Volatile, CacheMode::Persistent] {
        group.bench_function(format!("state_only/{cache}"), |b| {
            b.iter(|| replay(&entries, cache, None))
        });
    }
    group.bench_function("program_order_choices/volatile", |b| {
        b.iter(|| replay(&entries, CacheMode::Volatile, Some(Strategy::ProgramOrder)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
