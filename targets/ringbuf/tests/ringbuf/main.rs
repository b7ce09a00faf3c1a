//! Integration tests of the ring buffer through its public API.

mod access_kinds;
mod concurrency;
mod corruption;
mod faults;
mod gc;
mod mapped;
mod round_trip;
#[cfg(feature = "trace")]
mod trace_order;

use persim_ringbuf::{PmAccess, Region, RingBuf};

/// Every entry the log recovers, as (id, body); fails the test on a damaged entry.
fn recovered<R: Region, A: PmAccess, const ALIGN: usize>(
    log: &mut RingBuf<R, A, ALIGN>,
) -> Vec<(u64, Vec<u8>)> {
    log.recover()
        .map(|entry| {
            let entry = entry.expect("a correct writer leaves no damaged entry");
            (entry.id, entry.body.to_vec())
        })
        .collect()
}

/// A body that differs from those of other seeds at every length.
fn body(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}
