//! Random runs: puts of random sizes that fill chunks exactly or move to the next, in new
//! or current generations, txg syncs, and a full log, in both cache modes.

use persim_crash_check::{body, consistency, style_cache_pairs};
use persim_model::{CacheMode, Strategy as ModelStrategy};
use persim_ringbuf::TraceStyle;
use persim_zil_pmem::HEADER_SIZE;
use proptest::prelude::*;

use crate::checker::check;
use crate::run::{record, Shape, Step};

/// A low cap keeps each case fast; failure points above it are sampled (seeded).
const MAX_IMAGES: usize = 256;

/// A step before the chunk size is known.
#[derive(Clone, Debug)]
enum Draw {
    /// A body of this length, reduced modulo one more than the largest body.
    Put(usize, bool),
    Sync,
}

fn draw() -> impl Strategy<Value = Draw> {
    prop_oneof![
        // Mostly bodies of a few lines, so that exhaustive enumeration stays complete.
        6 => ((0usize..300), any::<bool>()).prop_map(|(len, gen)| Draw::Put(len, gen)),
        // Some up to a whole chunk, to fill chunks exactly or overflow them.
        2 => (any::<usize>(), any::<bool>()).prop_map(|(len, gen)| Draw::Put(len, gen)),
        2 => Just(Draw::Sync),
    ]
}

/// The (style, cache) pairs in which the write path must be crash-consistent.
fn setup() -> impl Strategy<Value = (TraceStyle, CacheMode)> {
    prop::sample::select(style_cache_pairs())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_runs_survive_every_crash(
        chunk_headers in 2usize..=6,
        chunk_count in 1usize..=3,
        draws in prop::collection::vec(draw(), 1..14),
        (style, cache) in setup(),
        strategy in prop_oneof![Just(ModelStrategy::Exhaustive), Just(ModelStrategy::GlobalPrefix)],
    ) {
        let shape = Shape { chunk_size: chunk_headers * HEADER_SIZE, chunk_count };
        let max_body = shape.chunk_size - HEADER_SIZE;
        let steps: Vec<Step> = draws
            .iter()
            .enumerate()
            .map(|(seed, draw)| match *draw {
                Draw::Put(len, new_gen) => Step::Put {
                    body: body(seed as u64, len % (max_body + 1)),
                    new_gen,
                },
                Draw::Sync => Step::Sync,
            })
            .collect();
        let run = record(style, shape, &steps);
        let report = check(&run, cache, strategy, MAX_IMAGES);
        consistency(&report).map_err(TestCaseError::fail)?;
    }
}
