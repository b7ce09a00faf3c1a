//! Crash consistency of the ring buffer, proved with Persim's crash model in process.
//!
//! A run formats a small log, records the trace of a sequence of appends and releases with
//! the [`persim_ringbuf::Tracing`] access, and replays it through the crash model
//! (`persim_model`). Every crash image the model produces is opened and recovered as after a
//! restart, and checked against what the run had appended and acknowledged when it crashed
//! (see `oracle`). The correct build must pass every check; each mutant build
//! (`--features mutant-...`) must fail one, which `mutants` asserts.

mod checker;
mod oracle;
mod patterns;
mod run;
mod scenarios;

#[cfg(not(any(
    feature = "mutant-no-first-fence",
    feature = "mutant-no-second-fence",
    feature = "mutant-no-zero-next-header"
)))]
mod correct;
#[cfg(any(
    feature = "mutant-no-first-fence",
    feature = "mutant-no-second-fence",
    feature = "mutant-no-zero-next-header"
))]
mod mutants;
#[cfg(not(any(
    feature = "mutant-no-first-fence",
    feature = "mutant-no-second-fence",
    feature = "mutant-no-zero-next-header"
)))]
mod props;

use persim_model::{CacheMode, Strategy};
use persim_ringbuf::TraceStyle;

/// The trace styles worth checking in a cache mode. The eADR style issues no flushes, so
/// it is only correct where caches are persistent; on volatile caches it is broken by
/// design and not checked as a pass.
fn styles(cache: CacheMode) -> &'static [TraceStyle] {
    match cache {
        CacheMode::Volatile => &[TraceStyle::NonTemporal, TraceStyle::Clwb],
        CacheMode::Persistent => &[TraceStyle::NonTemporal, TraceStyle::Clwb, TraceStyle::Eadr],
    }
}

const CACHES: [CacheMode; 2] = [CacheMode::Volatile, CacheMode::Persistent];
const STRATEGIES: [Strategy; 3] = [
    Strategy::Exhaustive,
    Strategy::GlobalPrefix,
    Strategy::ProgramOrder,
];

/// A body that differs from those of other seeds at every length and is never all zero,
/// so that a body that did not reach PM always fails its checksum.
fn body(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8 | 1)
        .collect()
}
