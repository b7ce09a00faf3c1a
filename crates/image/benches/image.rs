//! Crash-image costs: clone + 1-byte write + hash (the per-image cost of replay), and the
//! throughput of a first full hash next to plain `blake3::hash` of the same bytes.
//!
//! cargo bench -p persim-image --bench image -- --warm-up-time 1 --measurement-time 3

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use persim_image::Image;

const SIZES: [(&str, u64); 2] = [("5MiB", 5 << 20), ("100MiB", 100 << 20)];

fn noise(len: u64) -> Vec<u8> {
    let mut bytes = vec![0; len as usize];
    blake3::Hasher::new().finalize_xof().fill(&mut bytes);
    bytes
}

fn image_of(bytes: &[u8]) -> Image {
    let mut image = Image::zeroed(bytes.len() as u64);
    image.write(0, bytes);
    image
}

fn clone_write_hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("clone+write1+hash");
    for (name, len) in SIZES {
        let base = image_of(&noise(len));
        base.hash();
        let mut offset = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                // A different leaf each time, spread over the image.
                offset = (offset + 7_777_777) % len;
                let mut image = base.clone();
                image.write(offset, &[offset as u8]);
                black_box(image.hash())
            })
        });
    }
    group.finish();
}

fn first_hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("first-hash");
    for (name, len) in SIZES {
        let bytes = noise(len);
        group.throughput(Throughput::Bytes(len));
        group.bench_function(BenchmarkId::new("image", name), |b| {
            // A fresh tree each time: nothing cached.
            b.iter_batched(
                || image_of(&bytes),
                |image| black_box(image.hash()),
                BatchSize::LargeInput,
            )
        });
        group.bench_function(BenchmarkId::new("blake3", name), |b| {
            b.iter(|| black_box(blake3::hash(&bytes)))
        });
        println!(
            "first-hash/{name}: image/blake3 time ratio {:.3}",
            hash_time_ratio(&bytes)
        );
    }
    group.finish();
}

/// Best-of-five time of a first `Image::hash` divided by that of `blake3::hash`.
fn hash_time_ratio(bytes: &[u8]) -> f64 {
    let best = |mut run: Box<dyn FnMut() -> Duration>| (0..5).map(|_| run()).min().unwrap();
    let image_time = best(Box::new(|| {
        let image = image_of(bytes);
        let start = Instant::now();
        black_box(image.hash());
        start.elapsed()
    }));
    let blake3_time = best(Box::new(|| {
        let start = Instant::now();
        black_box(blake3::hash(bytes));
        start.elapsed()
    }));
    image_time.as_secs_f64() / blake3_time.as_secs_f64()
}

criterion_group!(benches, clone_write_hash, first_hash);
criterion_main!(benches);
