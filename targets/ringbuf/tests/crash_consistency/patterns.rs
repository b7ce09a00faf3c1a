//! `persim analyze`'s trace patterns on the ring buffer's own traces: the correct build
//! leaves nothing undurable and overwrites nothing before it is durable, in every style
//! and cache mode it is correct in; without the second fence, an acknowledged header is
//! not durable at the checkpoint after its append.

use persim_crash_check::{styles, CACHES};
use persim_inspect::{find_patterns, Owner, PatternKind};

use crate::run::record;
use crate::scenarios::fill_release_reuse;

/// The patterns that mean a durability bug (the others are performance hints).
const BUGS: [PatternKind; 3] = [
    PatternKind::MissingPersist,
    PatternKind::OverwriteUnpersisted,
    PatternKind::FlushUnwritten,
];

/// The patterns found in the fill/release/reuse run, per (style, cache mode).
fn bug_counts() -> Vec<(String, u64)> {
    let (shape, steps) = fill_release_reuse();
    let mut counts = Vec::new();
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record::<64>(style, shape, &steps);
            let entries = run.trace.into_iter().map(Ok);
            let patterns = find_patterns(entries, cache, None).unwrap();
            let found: u64 = BUGS.iter().map(|&k| patterns.count(k)).sum();
            eprintln!(
                "{style:?}, {cache} caches:\n{}",
                patterns.to_text(None, &[Owner::Program])
            );
            counts.push((format!("{style:?}, {cache}"), found));
        }
    }
    counts
}

#[cfg(not(feature = "mutant-no-second-fence"))]
#[test]
fn the_ring_buffer_traces_have_no_durability_pattern() {
    for (run, found) in bug_counts() {
        assert_eq!(found, 0, "{run}");
    }
}

#[cfg(feature = "mutant-no-second-fence")]
#[test]
fn without_the_second_fence_the_header_is_not_durable_at_the_checkpoint() {
    for (run, found) in bug_counts() {
        assert!(found > 0, "{run}");
    }
}
