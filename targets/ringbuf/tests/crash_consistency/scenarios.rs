//! Fixed runs that exercise every path of the write protocol.

use persim_crash_check::body;

use crate::run::{Shape, Step};

/// Four chunks of 1 KiB at alignment 64: fills chunks exactly and by overflow, releases a
/// chunk and appends into it again over entries of its previous use (with headers of old
/// entries where the new next headers fall), then releases two chunks at once.
pub fn fill_release_reuse() -> (Shape, Vec<Step>) {
    let shape = Shape {
        chunk_size: 1024,
        chunk_count: 4,
    };
    let append = |seed: u64, len: usize| Step::Append(body(seed, len));
    let mut steps: Vec<Step> = (1..=8).map(|id| append(id, 64)).collect(); // chunk 0, full
    steps.extend([
        append(9, 100),    // chunk 1 at 0
        Step::Release(9),  // chunk 0
        append(10, 768),   // fills chunk 1 exactly
        append(11, 64),    // chunk 0 again, over old entry 1; old entry 2's header follows
        append(12, 100),   // over old entry 2's header; its next header lands in old body 3
        append(13, 0),     // an empty body: the header alone
        append(14, 576),   // fills chunk 0 exactly
        append(15, 200),   // chunk 2
        Step::Release(15), // chunks 1 and 0 in one fence
        append(16, 64),
    ]);
    (shape, steps)
}
