//! The correct build: no crash image at any failure point breaks a guarantee, with either
//! strategy, in both cache modes, for every trace style that is correct there.

use persim_crash_check::{assert_consistent, styles, CACHES};
use persim_ringbuf::TraceStyle;

use crate::checker::check;
use crate::run::{record, Done, Shape, Step};
use crate::scenarios::{fill_sync_reuse, put};
use crate::STRATEGIES;

/// Above this many images per failure point the model samples (seeded).
const MAX_IMAGES: usize = 4096;

fn assert_crash_consistent(shape: Shape, steps: &[Step]) {
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record(style, shape, steps);
            for strategy in STRATEGIES {
                let report = check(&run, cache, strategy, MAX_IMAGES);
                assert_consistent(&report, &format!("{style:?}, {cache} caches, {strategy}"));
            }
        }
    }
}

#[test]
fn filling_syncing_and_reusing_chunks_survives_every_crash() {
    let (shape, steps) = fill_sync_reuse();
    assert_crash_consistent(shape, &steps);
}

#[test]
fn a_full_log_and_its_reuse_survive_every_crash() {
    let (shape, steps) = until_full_and_back();
    assert_crash_consistent(shape, &steps);
}

#[test]
fn the_runs_do_what_the_scenarios_say() {
    // The oracle relies on the run's record; check it against the scenarios' layout.
    let (shape, steps) = fill_sync_reuse();
    let run = record(TraceStyle::NonTemporal, shape, &steps);
    let gens: Vec<(u64, u64)> = run
        .done
        .iter()
        .filter_map(|d| match d {
            Done::Put { position, txg, .. } => Some((position.gen, *txg)),
            Done::Sync { .. } => None,
        })
        .collect();
    assert_eq!(
        gens,
        [
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 2),
            (5, 2),
            (5, 2),
            (6, 2),
            (7, 3)
        ]
    );
    // Frees: chunk 0 at the first sync, chunks 1 and 0 at the second.
    assert_eq!(run.free_after, [3, 3, 2, 3, 3, 2, 2, 1, 3, 3]);
    let (shape, steps) = until_full_and_back();
    let run = record(TraceStyle::NonTemporal, shape, &steps);
    assert_eq!(
        run.done.len(),
        6,
        "the third and fifth puts found the log full"
    );
    assert_eq!(run.free_after, [1, 0, 1, 0, 1, 0]);
}

/// Two chunks of 512 bytes: each entry fills a chunk, the log fills up and puts are
/// skipped; each sync frees the chunk no committer writes to, and the puts go on over the
/// old entries.
pub fn until_full_and_back() -> (Shape, Vec<Step>) {
    let shape = Shape {
        chunk_size: 512,
        chunk_count: 2,
    };
    let steps = vec![
        put(1, 200, true),
        put(2, 200, true),
        put(3, 200, true), // the log is full
        Step::Sync,
        put(4, 150, true),
        put(5, 150, false), // full again
        Step::Sync,
        put(6, 10, true),
    ];
    (shape, steps)
}
