//! Crash consistency of the ZIL-PMEM log engine, proved with Persim's crash model in
//! process.
//!
//! A run formats a small log, records the trace of a consumer's puts and txg syncs with
//! persim-ringbuf's `Tracing` access, and replays it through the crash model
//! (`persim_model`). Every crash image is opened, claimed and replayed as after a restart,
//! and checked against what the run had written and acknowledged when it crashed (see
//! `oracle`). The correct build must pass every check; each mutant build
//! (`--features mutant-...`) must fail one, which `mutants` asserts.

mod checker;
mod flipped_bit;
mod oracle;
mod run;
mod scenarios;

#[cfg(not(any(
    feature = "mutant-no-drain-between-body-and-header",
    feature = "mutant-no-zero-next-header",
    feature = "mutant-no-zero-freed-chunk",
    feature = "mutant-no-body-checksum"
)))]
mod correct;
#[cfg(any(
    feature = "mutant-no-drain-between-body-and-header",
    feature = "mutant-no-zero-next-header",
    feature = "mutant-no-zero-freed-chunk",
    feature = "mutant-no-body-checksum"
))]
mod mutants;
#[cfg(not(any(
    feature = "mutant-no-drain-between-body-and-header",
    feature = "mutant-no-zero-next-header",
    feature = "mutant-no-zero-freed-chunk",
    feature = "mutant-no-body-checksum"
)))]
mod props;

use persim_model::{CacheMode, Strategy};
use persim_ringbuf::TraceStyle;

/// The trace styles worth checking in a cache mode: the eADR style issues no flushes, so
/// it is only correct where caches are persistent.
fn styles(cache: CacheMode) -> &'static [TraceStyle] {
    match cache {
        CacheMode::Volatile => &[TraceStyle::NonTemporal, TraceStyle::Clwb],
        CacheMode::Persistent => &[TraceStyle::NonTemporal, TraceStyle::Clwb, TraceStyle::Eadr],
    }
}

const CACHES: [CacheMode; 2] = [CacheMode::Volatile, CacheMode::Persistent];
const STRATEGIES: [Strategy; 2] = [Strategy::Exhaustive, Strategy::GlobalPrefix];

/// A body that differs from those of other seeds at every length and is never all zero.
fn body(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8 | 1)
        .collect()
}
