//! Replays a run through the crash model and recovers every crash image as it is produced.

use persim_crash_check::check_restarts;
use persim_model::{CacheMode, CheckReport, Strategy};
use persim_ringbuf::{AppendError, Eadr, HeapRegion, RingBuf};

use crate::oracle::{Expected, Problem, Recovered};
use crate::run::Run;

/// What one replay found.
pub type Report = CheckReport<Problem>;

/// Replays `run` with `cache` and `strategy` (at most `max_images` per failure point) and
/// opens and recovers every crash image as a log of alignment `ALIGN`.
pub fn check<const ALIGN: usize>(
    run: &Run,
    cache: CacheMode,
    strategy: Strategy,
    max_images: usize,
) -> Report {
    check_restarts(
        &run.initial,
        &run.trace,
        cache,
        strategy,
        max_images,
        |point, region| restart::<ALIGN>(region, &Expected::at(run, point)),
    )
}

/// Opens the crash image as a restarted program would, recovers it and judges the result;
/// then appends once and checks that the new entry joins the recovered ones (the open
/// must not append over a torn tail or reuse an id).
fn restart<const ALIGN: usize>(region: HeapRegion, expected: &Expected) -> Result<(), Problem> {
    let mut log = RingBuf::<_, _, ALIGN>::open(region, Eadr, 1).map_err(Problem::Open)?;
    let recovered = recover(&mut log);
    expected.judge(&recovered)?;
    let body = b"appended after the restart";
    match log.append(body) {
        Ok(id) => {
            let mut want = recovered;
            want.push(Ok((id, body.to_vec())));
            let got = recover(&mut log);
            if got != want {
                return Err(Problem::Restart(format!(
                    "appending entry {id} left the ids {:?}",
                    ids(&got)
                )));
            }
        }
        Err(AppendError::LogFull { .. }) => {}
        Err(e) => return Err(Problem::Restart(e.to_string())),
    }
    Ok(())
}

fn recover<const ALIGN: usize>(log: &mut RingBuf<HeapRegion, Eadr, ALIGN>) -> Recovered {
    log.recover()
        .map(|item| item.map(|entry| (entry.id, entry.body.to_vec())))
        .collect()
}

/// The ids recovered, damaged entries included (0: a damaged header).
fn ids(recovered: &Recovered) -> Vec<u64> {
    recovered
        .iter()
        .map(|item| {
            item.as_ref()
                .map_or_else(|e| e.id().unwrap_or(0), |(id, _)| *id)
        })
        .collect()
}
