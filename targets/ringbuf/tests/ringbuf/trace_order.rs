//! The trace the tracing access records: what the crash model will replay.

use persim_ringbuf::{
    AccessVisitor, Eadr, HeapRegion, RingBuf, TraceStyle, Tracing, LINE, SUPERBLOCK_SPACE,
};
use persim_trace::{Entry, FenceKind, FlushKind, Hypercall, Op};

use crate::access_kinds::Workload;
use crate::body;

const CHUNK: usize = 4096;

/// Formats a traced log, discards the formatting's trace, appends `bodies` and returns the
/// trace of the appends.
fn trace_appends(style: TraceStyle, checkpoints: bool, bodies: &[Vec<u8>]) -> Vec<Entry> {
    let region = HeapRegion::new(SUPERBLOCK_SPACE + 4 * CHUNK);
    let log =
        RingBuf::<_, _, 256>::format(region, Tracing::new(style, checkpoints), CHUNK, 1).unwrap();
    log.access().take();
    for data in bodies {
        log.append(data).unwrap();
    }
    log.access().take()
}

/// One line per entry, e.g. `ntwrite 4160`, `flush 4160`, `fence`, `checkpoint 0`.
fn shape(trace: &[Entry]) -> Vec<String> {
    trace
        .iter()
        .map(|entry| match &entry.op {
            Op::Write { addr, nt: true, .. } => format!("ntwrite {addr}"),
            Op::Write {
                addr, nt: false, ..
            } => format!("write {addr}"),
            Op::Flush {
                kind: FlushKind::Clwb,
                addr,
            } => format!("flush {addr}"),
            Op::Fence(FenceKind::Sfence) => "fence".into(),
            Op::Hypercall(Hypercall::Checkpoint(n)) => format!("checkpoint {n}"),
            other => panic!("the ring buffer does not issue {other:?}"),
        })
        .collect()
}

/// The expected order for one 100-byte append at the start of chunk 0 (offset 4096):
/// zero the next header (at 4096 + 256), write the body (two lines from 4160), fence,
/// write the header, fence; each mutant drops its step.
fn expected_append(store: &str, flush: bool) -> Vec<String> {
    let mut steps = vec!["checkpoint 0".to_string()];
    let stores = |steps: &mut Vec<String>, addrs: &[usize]| {
        for addr in addrs {
            steps.push(format!("{store} {addr}"));
            if flush {
                steps.push(format!("flush {addr}"));
            }
        }
    };
    if !cfg!(feature = "mutant-no-zero-next-header") {
        stores(&mut steps, &[4352]);
    }
    stores(&mut steps, &[4160, 4224]);
    if !cfg!(feature = "mutant-no-first-fence") {
        steps.push("fence".into());
    }
    stores(&mut steps, &[4096]);
    if !cfg!(feature = "mutant-no-second-fence") {
        steps.push("fence".into());
    }
    steps.push("checkpoint 1".into());
    steps
}

fn written(trace: &[Entry], at: u64) -> &[u8] {
    trace
        .iter()
        .find_map(|entry| match &entry.op {
            Op::Write { addr, data, .. } if *addr == at => Some(&data[..]),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no write at {at}"))
}

#[test]
fn one_append_zeroes_the_next_header_writes_the_body_fences_writes_the_header_fences() {
    let data = body(1, 100);
    let trace = trace_appends(TraceStyle::NonTemporal, true, std::slice::from_ref(&data));
    assert_eq!(shape(&trace), expected_append("ntwrite", false));
    if !cfg!(feature = "mutant-no-zero-next-header") {
        assert_eq!(written(&trace, 4352), [0; LINE]);
    }
    assert_eq!(written(&trace, 4160), &data[..64]);
    assert_eq!(&written(&trace, 4224)[..36], &data[64..]);
    assert_eq!(written(&trace, 4224)[36..], [0; 28]);
    let header = written(&trace, 4096);
    assert_eq!(header[..8], 1u64.to_le_bytes(), "entry id");
    assert_eq!(header[8..12], 100u32.to_le_bytes(), "body length");
    assert_eq!(
        header[12..16],
        crc32c::crc32c(&data).to_le_bytes(),
        "body checksum"
    );
}

#[test]
fn the_clwb_style_flushes_every_line_it_writes() {
    let trace = trace_appends(TraceStyle::Clwb, true, &[body(1, 100)]);
    assert_eq!(shape(&trace), expected_append("write", true));
}

#[test]
fn stores_are_traced_as_whole_lines_and_checkpoints_count_up() {
    let bodies = [body(1, 5000 % (CHUNK - 64)), body(2, 0), body(3, 130)];
    let trace = trace_appends(TraceStyle::NonTemporal, true, &bodies);
    for entry in &trace {
        if let Op::Write { addr, data, .. } = &entry.op {
            assert_eq!(addr % LINE as u64, 0, "line-aligned");
            assert_eq!(data.len(), LINE, "one line");
        }
    }
    let checkpoints: Vec<u64> = trace
        .iter()
        .filter_map(|entry| match entry.op {
            Op::Hypercall(Hypercall::Checkpoint(n)) => Some(n),
            _ => None,
        })
        .collect();
    assert_eq!(checkpoints, [0, 1, 2, 3, 4, 5]);
    let untraced = trace_appends(TraceStyle::NonTemporal, false, &bodies);
    assert!(untraced
        .iter()
        .all(|entry| !matches!(entry.op, Op::Hypercall(_))));
    assert_eq!(untraced.len(), trace.len() - 6);
}

#[test]
fn tracing_writes_memory_like_a_hardware_access() {
    for style in [TraceStyle::NonTemporal, TraceStyle::Clwb, TraceStyle::Eadr] {
        assert!(
            Workload.visit(Tracing::new(style, true)) == Workload.visit(Eadr),
            "{style:?}"
        );
    }
}
