//! Recording a traced run: the formatted image, the trace, and what each operation did.

use persim_ringbuf::{Eadr, HeapRegion, TraceStyle, Tracing};
use persim_trace::{Entry, Hypercall, Op};
use persim_zil_pmem::{AppendError, LogHeader, Position, ZilPmem, SUPERBLOCK_SPACE};

pub const GUIDS: (u64, u64) = (0x2001, 0x3002);

pub fn header() -> LogHeader {
    LogHeader::new(GUIDS.0, GUIDS.1)
}

/// One step of the consumer.
#[derive(Clone, Debug)]
pub enum Step {
    /// A synchronous write logged in the open txg; `new_gen` makes it depend on every
    /// write before it.
    Put { body: Vec<u8>, new_gen: bool },
    /// The consumer commits the open txg, then tells the log.
    Sync,
}

/// The shape of the log a run formats.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub chunk_size: usize,
    pub chunk_count: usize,
}

/// An operation that reached the log (bracketed by checkpoints 2k and 2k + 1).
#[derive(Clone, Debug)]
pub enum Done {
    Put {
        position: Position,
        txg: u64,
        body: Vec<u8>,
    },
    /// The consumer's commit of `txg` took effect at trace index `at`: it is durable at
    /// failure points from `at` on.
    Sync { txg: u64, at: u64 },
}

/// What a run left for the crash model and the oracle.
#[derive(Clone, Debug)]
pub struct Run {
    /// The region right after formatting: the replay's initial PM contents.
    pub initial: Vec<u8>,
    pub trace: Vec<Entry>,
    pub done: Vec<Done>,
    /// Free chunks after each operation in `done`.
    pub free_after: Vec<usize>,
    pub chunk_count: usize,
}

/// Formats a log of `shape` (one committer), then performs `steps` through a [`Tracing`]
/// access of `style`. Puts that find the log full are skipped: they write nothing (the
/// consumer would commit them with the txg).
pub fn record(style: TraceStyle, shape: Shape, steps: &[Step]) -> Run {
    let region = HeapRegion::new(SUPERBLOCK_SPACE + shape.chunk_size * shape.chunk_count);
    let region = ZilPmem::format(region, Eadr, shape.chunk_size, 1)
        .expect("the shape is valid")
        .into_region();
    let initial = region.as_slice().to_vec();
    let mut log = ZilPmem::open(region, Tracing::new(style, true), 1).expect("formatted");
    let claim = log.claim(&header(), 1).expect("claimed once");
    log.replay(&claim, |_, _| Ok::<(), ()>(())).expect("empty");
    let mut run = Run {
        initial,
        trace: log.access().take(),
        done: Vec::new(),
        free_after: Vec::new(),
        chunk_count: shape.chunk_count,
    };
    assert!(run.trace.is_empty(), "claiming an empty log writes nothing");
    let mut txg = 1;
    for step in steps {
        match step {
            Step::Put { body, new_gen } => match log.append(1, txg, body, *new_gen) {
                Ok(position) => run.done.push(Done::Put {
                    position,
                    txg,
                    body: body.clone(),
                }),
                Err(AppendError::LogFull) => continue,
                Err(e) => panic!("the steps must fit the shape: {e}"),
            },
            Step::Sync => {
                let at = run.trace.len() as u64;
                log.txg_synced(txg);
                run.done.push(Done::Sync { txg, at });
                txg += 1;
            }
        }
        run.trace.extend(log.access().take());
        run.free_after.push(log.free_chunks());
    }
    let checkpoints = run
        .trace
        .iter()
        .filter(|entry| matches!(entry.op, Op::Hypercall(Hypercall::Checkpoint(_))))
        .count();
    assert_eq!(
        checkpoints,
        2 * run.done.len(),
        "two checkpoints per operation"
    );
    run
}
