//! Random runs: append sequences with random body sizes that fill chunks exactly or move
//! to the next, releases, and a full log, in both cache modes.

use persim_crash_check::{body, consistency, style_cache_pairs};
use persim_model::{CacheMode, Strategy as ModelStrategy};
use persim_ringbuf::{TraceStyle, HEADER_SPACE};
use proptest::prelude::*;

use crate::checker::check;
use crate::run::{record, Shape, Step};

const ALIGN: usize = 64;
/// A low cap keeps each case fast; failure points above it are sampled (seeded).
const MAX_IMAGES: usize = 1024;

/// A step before the chunk size is known.
#[derive(Clone, Debug)]
enum Draw {
    /// A body of this length, reduced modulo one more than the largest body.
    Append(usize),
    Release(u64),
}

fn draw() -> impl Strategy<Value = Draw> {
    prop_oneof![
        // Mostly bodies of a few lines, so that exhaustive enumeration stays complete.
        6 => (0usize..200).prop_map(Draw::Append),
        // Some up to a whole chunk, to fill chunks exactly or overflow them.
        2 => any::<usize>().prop_map(Draw::Append),
        1 => (0u64..16).prop_map(Draw::Release),
    ]
}

/// The (style, cache) pairs in which the write path must be crash-consistent.
fn setup() -> impl Strategy<Value = (TraceStyle, CacheMode)> {
    prop::sample::select(style_cache_pairs())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_runs_survive_every_crash(
        chunk_lines in 2usize..=16,
        chunk_count in 1usize..=4,
        draws in prop::collection::vec(draw(), 1..24),
        (style, cache) in setup(),
        strategy in prop_oneof![Just(ModelStrategy::Exhaustive), Just(ModelStrategy::GlobalPrefix)],
    ) {
        let shape = Shape { chunk_size: chunk_lines * ALIGN, chunk_count };
        let max_body = shape.chunk_size - HEADER_SPACE;
        let steps: Vec<Step> = draws
            .iter()
            .enumerate()
            .map(|(seed, draw)| match *draw {
                Draw::Append(len) => Step::Append(body(seed as u64, len % (max_body + 1))),
                Draw::Release(up_to) => Step::Release(up_to),
            })
            .collect();
        let run = record::<ALIGN>(style, shape, &steps);
        let report = check::<ALIGN>(&run, cache, strategy, MAX_IMAGES);
        consistency(&report).map_err(TestCaseError::fail)?;
    }
}
