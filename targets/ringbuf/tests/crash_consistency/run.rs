//! Recording a traced run: the formatted image, the trace, and what each step did.

use std::collections::BTreeSet;

use persim_ringbuf::{
    AppendError, Eadr, HeapRegion, PmAccess, Region, RingBuf, TraceStyle, Tracing, SUPERBLOCK_SPACE,
};
use persim_trace::{Entry, Hypercall, Op};

/// One step of a run.
#[derive(Clone, Debug)]
pub enum Step {
    Append(Vec<u8>),
    /// Release every full chunk whose ids are all below this one.
    Release(u64),
}

/// The shape of the log a run formats.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub chunk_size: usize,
    pub chunk_count: usize,
}

impl Shape {
    pub fn region_len(self) -> usize {
        SUPERBLOCK_SPACE + self.chunk_size * self.chunk_count
    }
}

/// A release and the trace entries it issued.
#[derive(Clone, Debug)]
pub struct ReleaseRecord {
    /// Trace indices `[start, end)` of its stores and its fence.
    pub start: u64,
    pub end: u64,
    /// The ids it removed from the log.
    pub ids: BTreeSet<u64>,
}

/// What a run left for the crash model and the oracle.
#[derive(Clone, Debug)]
pub struct Run {
    /// The region right after formatting: the replay's initial PM contents.
    pub initial: Vec<u8>,
    pub trace: Vec<Entry>,
    /// (id, body) of every successful append, in order. The k-th is bracketed by
    /// checkpoints 2k and 2k + 1.
    pub appends: Vec<(u64, Vec<u8>)>,
    pub releases: Vec<ReleaseRecord>,
}

/// Formats a log of `shape` (alignment `ALIGN`, one committer), then performs `steps`
/// through a [`Tracing`] access of `style` with checkpoints around each append. Appends
/// that find the log full are skipped: they write nothing.
pub fn record<const ALIGN: usize>(style: TraceStyle, shape: Shape, steps: &[Step]) -> Run {
    let region = HeapRegion::new(shape.region_len());
    let region = RingBuf::<_, _, ALIGN>::format(region, Eadr, shape.chunk_size, 1)
        .expect("the shape is valid")
        .into_parts()
        .0;
    let initial = region.as_slice().to_vec();
    let mut log = RingBuf::<_, _, ALIGN>::open(region, Tracing::new(style, true), 1)
        .expect("a formatted region opens");
    let mut run = Run {
        initial,
        trace: Vec::new(),
        appends: Vec::new(),
        releases: Vec::new(),
    };
    for step in steps {
        match step {
            Step::Append(body) => match log.append(body) {
                Ok(id) => run.appends.push((id, body.clone())),
                Err(AppendError::LogFull { .. }) => {}
                Err(e) => panic!("the steps must fit the shape: {e}"),
            },
            Step::Release(up_to) => {
                let before = live_ids(&mut log);
                log.release(*up_to);
                let start = run.trace.len() as u64;
                run.trace.extend(log.access().take());
                run.releases.push(ReleaseRecord {
                    start,
                    end: run.trace.len() as u64,
                    ids: before.difference(&live_ids(&mut log)).copied().collect(),
                });
            }
        }
        run.trace.extend(log.access().take());
    }
    let checkpoints = run
        .trace
        .iter()
        .filter(|entry| matches!(entry.op, Op::Hypercall(Hypercall::Checkpoint(_))))
        .count();
    assert_eq!(
        checkpoints,
        2 * run.appends.len(),
        "two checkpoints per append"
    );
    run
}

/// The ids the live log holds (damaged entries whose id can be read included).
fn live_ids<R: Region, A: PmAccess, const ALIGN: usize>(
    log: &mut RingBuf<R, A, ALIGN>,
) -> BTreeSet<u64> {
    log.recover()
        .filter_map(|entry| entry.map_or_else(|e| e.id(), |e| Some(e.id)))
        .collect()
}
