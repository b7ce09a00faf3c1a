//! Checks a PM library against Persim's crash model in process.
//!
//! A test records the trace of a run through persim-ringbuf's `Tracing` access, then hands
//! it here with a `restart` that opens one crash image as a restarted program would and
//! judges what it recovers. This is the harness the ring buffer's and ZIL-PMEM's
//! crash-consistency tests share; what a restart must find stays with each library.

use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};

use persim_model::{check_crash_images, CacheMode, CheckReport, Config, FailurePoint, Strategy};
use persim_ringbuf::{HeapRegion, TraceStyle};
use persim_trace::Entry;

/// Both cache modes, volatile first.
pub const CACHES: [CacheMode; 2] = [CacheMode::Volatile, CacheMode::Persistent];

/// The trace styles worth checking in a cache mode. The eADR style issues no flushes, so it
/// is only correct where caches are persistent; on volatile caches it is broken by design
/// and not checked as a pass.
pub fn styles(cache: CacheMode) -> &'static [TraceStyle] {
    match cache {
        CacheMode::Volatile => &[TraceStyle::NonTemporal, TraceStyle::Clwb],
        CacheMode::Persistent => &[TraceStyle::NonTemporal, TraceStyle::Clwb, TraceStyle::Eadr],
    }
}

/// Every (style, cache mode) pair of [`styles`], for property tests that draw one.
pub fn style_cache_pairs() -> Vec<(TraceStyle, CacheMode)> {
    CACHES
        .iter()
        .flat_map(|&cache| styles(cache).iter().map(move |&style| (style, cache)))
        .collect()
}

/// A body that differs from those of other seeds at every length and is never all zero, so
/// that a body that did not reach PM always fails its checksum.
pub fn body(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8 | 1)
        .collect()
}

/// A restart that panicked; each library's problem type says how it reports one.
#[derive(Clone, Copy, Debug)]
pub struct Panicked;

/// Replays `trace` from `initial` with `cache` and `strategy` (at most `max_images` per
/// failure point, seeded samples above) and runs `restart` on a fresh region holding each
/// crash image. A panicking restart is a violation, not a test failure.
pub fn check_restarts<P: From<Panicked>>(
    initial: &[u8],
    trace: &[Entry],
    cache: CacheMode,
    strategy: Strategy,
    max_images: usize,
    mut restart: impl FnMut(FailurePoint, HeapRegion) -> Result<(), P>,
) -> CheckReport<P> {
    let mut config = Config::new(initial.len() as u64);
    config.cache = cache;
    config.strategy = strategy;
    config.max_images = max_images;
    check_crash_images(config, initial.to_vec(), trace, |point, bytes| {
        let mut region = HeapRegion::new(bytes.len());
        region.as_mut_slice().copy_from_slice(bytes);
        catch_unwind(AssertUnwindSafe(|| restart(point, region))).unwrap_or(Err(Panicked.into()))
    })
    .expect("a trace recorded by the Tracing access replays")
}

/// Whether `report` covered every failure point and found no violation; the error names
/// the first witness of each kind.
pub fn consistency<P: Display>(report: &CheckReport<P>) -> Result<(), String> {
    if report.images < report.points {
        return Err(format!(
            "{} images for {} failure points: some point had none",
            report.images, report.points
        ));
    }
    if report.witnesses.is_empty() {
        return Ok(());
    }
    let witnesses: Vec<String> = report.witnesses.iter().map(|v| v.to_string()).collect();
    Err(format!(
        "{} violations, e.g.\n{}",
        report.violation_count,
        witnesses.join("\n")
    ))
}

/// Prints what `report` covered and panics, naming the case (`what`), unless it is
/// [`consistency`]-clean.
pub fn assert_consistent<P: Display>(report: &CheckReport<P>, what: &str) {
    eprintln!(
        "{what}: {} failure points ({} sampled), {} images",
        report.points, report.incomplete, report.images
    );
    if let Err(problem) = consistency(report) {
        panic!("{what}: {problem}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_differ_by_seed_and_are_never_zero() {
        let (a, b) = (body(1, 300), body(2, 300));
        assert!(a.iter().zip(&b).all(|(x, y)| x != y));
        assert!(a.iter().all(|&x| x != 0));
    }

    #[test]
    fn eadr_is_checked_only_with_persistent_caches() {
        let pairs = style_cache_pairs();
        assert_eq!(pairs.len(), 5);
        assert!(!pairs.contains(&(TraceStyle::Eadr, CacheMode::Volatile)));
        assert!(pairs.contains(&(TraceStyle::Eadr, CacheMode::Persistent)));
    }
}
