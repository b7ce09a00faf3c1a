//! Replays a run through the crash model and recovers every crash image as it is produced.

use persim_crash_check::check_restarts;
use persim_model::{CacheMode, CheckReport, Strategy};
use persim_ringbuf::{Eadr, HeapRegion};
use persim_zil_pmem::{AppendError, Position, ReplayError, ZilPmem};

use crate::oracle::{Expected, Problem};
use crate::run::{header, Run};

/// What one replay found.
pub type Report = CheckReport<Problem>;

/// Replays `run` with `cache` and `strategy` (at most `max_images` per failure point) and
/// restarts from every crash image.
pub fn check(run: &Run, cache: CacheMode, strategy: Strategy, max_images: usize) -> Report {
    check_restarts(
        &run.initial,
        &run.trace,
        cache,
        strategy,
        max_images,
        |point, region| restart(region, &Expected::at(run, point)),
    )
}

/// Opens the crash image as the restarted consumer would, claims and replays it, and
/// judges the result; then commits past the claimed txgs, writes once more and checks that
/// a second restart claims exactly that entry.
fn restart(region: HeapRegion, expected: &Expected) -> Result<(), Problem> {
    let mut log = ZilPmem::open(region, Eadr, 1).map_err(Problem::Open)?;
    let claim = log
        .claim(&header(), expected.committed + 1)
        .expect("claimed once");
    for (chunk, positions) in claim.scanned.iter().enumerate() {
        if !positions.is_sorted_by(|a, b| a < b) {
            return Err(Problem::MixedChunk {
                chunk,
                positions: positions.clone(),
            });
        }
    }
    let free = log.free_chunks();
    if free < expected.min_free {
        return Err(Problem::FreedChunkInUse {
            free,
            expected: expected.min_free,
        });
    }
    let mut replayed: Vec<(Position, Vec<u8>)> = Vec::new();
    let result = log.replay(&claim, |entry, _| {
        replayed.push((entry.position, entry.body.to_vec()));
        Ok::<(), ()>(())
    });
    match result {
        Ok(_) => {}
        Err(ReplayError::Stopped(stop)) => return Err(Problem::Stopped(stop)),
        Err(ReplayError::Consumer { .. }) => unreachable!("the consumer never fails"),
    }
    expected.judge(&replayed)?;
    let committed = (expected.committed + 1).max(claim.max_txg);
    log.txg_synced(committed);
    let body = b"written after the restart";
    let position = match log.append(1, committed + 1, body, true) {
        Ok(position) => position,
        Err(AppendError::LogFull) => return Ok(()),
        Err(e) => return Err(Problem::Restart(e.to_string())),
    };
    let mut log = ZilPmem::open(log.into_region(), Eadr, 1).map_err(Problem::Open)?;
    let claim = log.claim(&header(), committed + 1).expect("claimed once");
    let claimed: Vec<Position> = claim.entries.iter().map(|e| e.header.position).collect();
    if claimed != [position] || claim.missing.is_some() {
        return Err(Problem::Restart(format!(
            "wrote {position:?}, a restart claims {claimed:?} ({:?})",
            claim.missing
        )));
    }
    Ok(())
}
