//! The log engine's guarantees without crash images: claim and replay after a clean stop,
//! the reader's edge cases, damaged bodies, missing dependencies, refused regions, and
//! concurrent committers.

mod claim;
mod concurrency;
mod damage;
mod openzfs;
mod refuse;

use persim_ringbuf::{Eadr, HeapRegion};
use persim_zil_pmem::{Claim, LogHeader, Position, ZilPmem};

const GUIDS: (u64, u64) = (0x5eed_0001, 0x5eed_0002);

fn header() -> LogHeader {
    LogHeader::new(GUIDS.0, GUIDS.1)
}

/// A formatted, claimed and (trivially) replayed log ready for appends.
fn new_log(chunk_size: usize, chunks: usize, committers: usize) -> ZilPmem<HeapRegion, Eadr> {
    let region = HeapRegion::new(persim_zil_pmem::SUPERBLOCK_SPACE + chunk_size * chunks);
    let mut log = ZilPmem::format(region, Eadr, chunk_size, committers).unwrap();
    let claim = log.claim(&header(), 1).unwrap();
    log.replay(&claim, |_, _| Ok::<(), ()>(())).unwrap();
    log
}

/// Reopens the region as after a crash and claims it with the consumer at `committed`.
fn reopen(region: HeapRegion, committed: u64) -> (ZilPmem<HeapRegion, Eadr>, Claim) {
    let mut log = ZilPmem::open(region, Eadr, 1).unwrap();
    let claim = log.claim(&header(), committed + 1).unwrap();
    (log, claim)
}

/// (position, body) of each entry replay applied.
type Applied = Vec<(Position, Vec<u8>)>;

/// Replays everything claim allows; returns the applied entries and the replay's result.
fn replay_all(
    log: &mut ZilPmem<HeapRegion, Eadr>,
    claim: &Claim,
) -> (Applied, Result<LogHeader, persim_zil_pmem::ReplayError<()>>) {
    let mut applied = Vec::new();
    let result = log.replay(claim, |entry, _| {
        applied.push((entry.position, entry.body.to_vec()));
        Ok(())
    });
    (applied, result)
}

fn body(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8 | 1)
        .collect()
}
