//! What a transaction costs on PM, counted from the trace of the stores and fences it
//! issues (machine-independent): an update of `n` bytes of one object writes its lines
//! back, their parity lines, two copies of a redo log sized to the changed bytes and of
//! the commit mark, and two idle marks (8 bytes each), with four fences.

mod common;

use common::{body, format, wide};
use persim_pangolin::Pool;
use persim_ringbuf::{TraceStyle, Tracing};
use persim_trace::{FenceKind, Op};

/// (lines stored, fences, bytes stored) of one transaction writing `len` bytes at `at` of
/// a 4 KiB object, traced in `style`.
fn cost(at: u64, len: u64, style: TraceStyle) -> (usize, usize, usize) {
    let pool = format(wide());
    let mut tx = pool.begin();
    let oid = tx.alloc(4096, 1).unwrap();
    tx.commit().unwrap();
    let pool = Pool::open(pool.into_region(), Tracing::new(style, false)).unwrap();
    let mut tx = pool.begin();
    tx.add_range(oid, at, len)
        .unwrap()
        .copy_from_slice(&body(9, len as usize));
    tx.commit().unwrap();
    let trace = pool.access().take();
    let writes = trace.iter().filter_map(|e| match &e.op {
        Op::Write { data, .. } => Some(data.len()),
        _ => None,
    });
    let (lines, bytes) = (writes.clone().count(), writes.sum());
    let fences = trace
        .iter()
        .filter(|e| matches!(e.op, Op::Fence(FenceKind::Sfence)))
        .count();
    (lines, fences, bytes)
}

#[test]
fn an_update_writes_its_lines_their_parity_and_a_replicated_log() {
    let mut rows = Vec::new();
    // The object's data starts 16 bytes into a line (after its header); byte 48 starts the
    // next line, so 8 bytes there touch the data line and the checksum's line.
    for (at, len) in [(48, 8), (48, 256), (48, 4000)] {
        let (lines, fences, whole) = cost(at, len, TraceStyle::NonTemporal);
        // The data lines and the header's.
        let touched = (len.div_ceil(64) + 1) as usize;
        // Per copy, entries sized to the change (8 bytes for offset and length, the bytes
        // padded to 8): the checksum's, then the data's, 52 bytes apart, so not joined.
        let entries = 16 + (8 + len).next_multiple_of(8);
        let log = 2 * entries.div_ceil(64) as usize;
        let marks = 2 + 2; // the commit mark and the idle mark, in both copies
        assert_eq!(lines, touched + touched + log + marks, "{len} bytes");
        assert_eq!(fences, 4);
        // Non-temporal stores write whole lines, but parity that a small change XORs in
        // atomically goes through the cache: its changed words only.
        assert!(
            whole <= lines * 64 && whole > (lines - touched) * 64,
            "{len} bytes: {whole} stored in {lines} lines"
        );
        // Cached stores write only the changed bytes of each line (of its parity line too, in
        // whole words: up to 14 bytes more a line),
        // the log body's bytes (not its last line's padding), the 32 bytes of each commit
        // mark and the 8 of each idle mark (its state and checksum word).
        let (same_lines, _, bytes) = cost(at, len, TraceStyle::Clwb);
        assert_eq!(same_lines, lines);
        let changed = len as usize + 4; // the data and the checksum, at most
        let fixed = 2 * entries as usize + 2 * 32 + 2 * 8;
        assert!(
            (fixed..=fixed + 2 * changed + 14 * touched).contains(&bytes),
            "{len} bytes: {bytes} stored"
        );
        rows.push(format!("| {len} | {lines} | {whole} | {bytes} |"));
    }
    eprintln!(
        "| bytes updated | lines stored | bytes, non-temporal | bytes, cached |\n|---|---|---|---|\n{}",
        rows.join("\n")
    );
}
