//! The correct build: no crash image at any failure point breaks a guarantee, with either
//! strategy, in both cache modes, for every trace style that is correct there.

use persim_ringbuf::TraceStyle;
use persim_zil_pmem::{Position, ReplayStop};

use crate::checker::check;
use crate::flipped_bit::replay_with_a_flipped_bit;
use crate::run::{record, Done, Shape, Step};
use crate::scenarios::{fill_sync_reuse, until_full_and_back};
use crate::{body, styles, CACHES, STRATEGIES};

/// Above this many images per failure point the model samples (seeded).
const MAX_IMAGES: usize = 4096;

fn assert_crash_consistent(shape: Shape, steps: &[Step]) {
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record(style, shape, steps);
            for strategy in STRATEGIES {
                let report = check(&run, cache, strategy, MAX_IMAGES);
                eprintln!(
                    "{style:?}, {cache} caches, {strategy}: {} failure points, {} images",
                    report.points, report.images
                );
                assert!(report.images >= report.points, "every point has images");
                let witnesses: Vec<String> =
                    report.witnesses.iter().map(|v| v.to_string()).collect();
                assert!(
                    witnesses.is_empty(),
                    "{style:?}, {cache} caches, {strategy}: {} violations, e.g.\n{}",
                    report.violation_count,
                    witnesses.join("\n")
                );
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

#[test]
fn a_flipped_bit_in_a_body_stops_replay_before_that_entry() {
    let (applied, stop) = replay_with_a_flipped_bit();
    assert_eq!(applied, [body(0, 500)]);
    let stop = stop.expect("replay must stop at the damaged body");
    assert_eq!(
        stop,
        ReplayStop::BodyChecksum {
            entry: Position { gen: 2, id: 1 },
            chunk: 0,
            offset: 768
        }
    );
}
