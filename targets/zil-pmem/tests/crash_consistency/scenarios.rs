//! Fixed runs that exercise every path of the write protocol.

use persim_crash_check::body;

use crate::run::{Shape, Step};

pub fn put(seed: u64, len: usize, new_gen: bool) -> Step {
    Step::Put {
        body: body(seed, len),
        new_gen,
    }
}

/// Four chunks of 1 KiB (two 256-byte bodies fill one): fills a chunk, syncs its txg so it
/// is freed, fills the next exactly to its end, reuses the freed chunk over entries of its
/// earlier use (a stale header where the next one goes), adds an entry to a generation
/// (no new dependency), syncs two chunks at once, and writes on.
pub fn fill_sync_reuse() -> (Shape, Vec<Step>) {
    let shape = Shape {
        chunk_size: 1024,
        chunk_count: 4,
    };
    let steps = vec![
        put(1, 256, true), // chunk 0 at 0, txg 1
        put(2, 256, true), // chunk 0 at 512: ends at the chunk's end
        put(3, 100, true), // chunk 1 at 0; chunk 0 is full
        Step::Sync,        // txg 1: frees chunk 0
        put(4, 256, true), // chunk 1 at 512, to its end
        put(5, 256, true), // chunk 0 again, over entry 1; entry 2's header follows
        put(6, 0, false),  // the same generation: an empty body
        put(7, 200, true), // chunk 2
        Step::Sync,        // txg 2: frees chunks 1 and 0
        put(8, 64, true),  // txg 3
    ];
    (shape, steps)
}
