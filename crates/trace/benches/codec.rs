//! Encode and decode throughput of the binary form on 1 M file-system-like entries.
//! Run: cargo bench -p persim-trace --bench codec -- --warm-up-time 1 --measurement-time 3

use std::hint::black_box;
use std::io::Cursor;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use persim_trace::synthetic::FsLike;
use persim_trace::{BinaryWriter, Entry, Header, Reader, TextWriter};

const ENTRIES: usize = 1_000_000;

fn encode_binary(entries: &[Entry]) -> Vec<u8> {
    let mut w = BinaryWriter::new(Vec::new(), &Header::default()).unwrap();
    for e in entries {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

fn encode_text(entries: &[Entry]) -> Vec<u8> {
    let mut w = TextWriter::new(Vec::new(), &Header::default()).unwrap();
    for e in entries {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

fn decode(bytes: &[u8]) -> usize {
    let mut count = 0;
    for entry in Reader::new(Cursor::new(bytes.to_vec())).unwrap() {
        black_box(entry.unwrap());
        count += 1;
    }
    count
}

fn codec(c: &mut Criterion) {
    let entries: Vec<Entry> = FsLike::new(7, false).take(ENTRIES).collect();
    let binary = encode_binary(&entries);
    let text = encode_text(&entries);
    println!(
        "{ENTRIES} entries: binary {} B, text {} B, ratio {:.3}",
        binary.len(),
        text.len(),
        binary.len() as f64 / text.len() as f64
    );

    let mut group = c.benchmark_group("fs_like_1M");
    group.sample_size(10);
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.bench_function("binary_encode", |b| b.iter(|| encode_binary(&entries)));
    group.bench_function("binary_decode", |b| b.iter(|| decode(&binary)));
    group.bench_function("text_encode", |b| b.iter(|| encode_text(&entries)));
    group.bench_function("text_decode", |b| b.iter(|| decode(&text)));
    group.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
