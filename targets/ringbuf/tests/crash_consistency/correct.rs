//! The correct build: no crash image at any failure point breaks a guarantee, with every
//! strategy, in both cache modes, for every trace style that is correct there.

use persim_crash_check::{assert_consistent, body, styles, CACHES};
use persim_ringbuf::TraceStyle;

use crate::checker::check;
use crate::run::{record, Shape, Step};
use crate::scenarios::fill_release_reuse;
use crate::STRATEGIES;

/// Above this many images per failure point the model samples (seeded).
const MAX_IMAGES: usize = 4096;

fn assert_crash_consistent<const ALIGN: usize>(shape: Shape, steps: &[Step]) {
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record::<ALIGN>(style, shape, steps);
            for strategy in STRATEGIES {
                let report = check::<ALIGN>(&run, cache, strategy, MAX_IMAGES);
                assert_consistent(&report, &format!("{style:?}, {cache} caches, {strategy}"));
            }
        }
    }
}

#[test]
fn filling_releasing_and_reusing_chunks_survives_every_crash() {
    let (shape, steps) = fill_release_reuse();
    assert_crash_consistent::<64>(shape, &steps);
}

#[test]
fn padded_entries_and_a_full_log_survive_every_crash() {
    let (shape, steps) = align_256_until_full();
    assert_crash_consistent::<256>(shape, &steps);
}

#[test]
fn the_run_acknowledges_what_it_appended_and_releases_what_it_asked() {
    // The oracle relies on the run's record; check it against the scenario's layout.
    let (shape, steps) = fill_release_reuse();
    let run = record::<64>(TraceStyle::NonTemporal, shape, &steps);
    let ids: Vec<u64> = run.appends.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=16).collect::<Vec<_>>());
    let released: Vec<Vec<u64>> = run
        .releases
        .iter()
        .map(|r| r.ids.iter().copied().collect())
        .collect();
    assert_eq!(released, [(1..=8).collect::<Vec<_>>(), (9..=14).collect()]);
    assert!(run.releases.iter().all(|r| r.start < r.end));
}

/// Two chunks of 1 KiB at the default alignment 256: entries padded to 256 bytes, a body
/// that does not fit the rest of a chunk moves to the next, and the log fills up.
pub fn align_256_until_full() -> (Shape, Vec<Step>) {
    let shape = Shape {
        chunk_size: 1024,
        chunk_count: 2,
    };
    let steps = [10, 200, 500, 300, 900, 1]
        .into_iter()
        .enumerate()
        .map(|(seed, len)| Step::Append(body(seed as u64, len)))
        .collect();
    (shape, steps)
}
