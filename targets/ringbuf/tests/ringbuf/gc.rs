//! Releasing chunks and reusing them.

use persim_ringbuf::{AppendError, Eadr, HeapRegion, RingBuf, SUPERBLOCK_SPACE};

use crate::{body, recovered};

const CHUNK: usize = 1024;

#[test]
fn release_frees_only_full_chunks_below_the_point_and_they_are_reused() {
    // Three chunks; bodies of 448 bytes make entries of 512, two per chunk.
    let mut log = RingBuf::<_, _, 64>::format(
        HeapRegion::new(SUPERBLOCK_SPACE + 3 * CHUNK),
        Eadr,
        CHUNK,
        1,
    )
    .unwrap();
    for id in 1..=5 {
        assert_eq!(log.append(&body(id, 448)), Ok(id));
    }
    // Chunks hold [1, 2], [3, 4] (both full) and [5] (still being filled).
    assert_eq!(log.release(3), 1, "only [1, 2] lies wholly below 3");
    assert_eq!(log.release(3), 0, "released chunks are not released twice");
    assert_eq!(log.append(&body(6, 448)), Ok(6));
    assert_eq!(
        log.append(&body(7, 448)),
        Ok(7),
        "goes to the released chunk"
    );
    assert_eq!(log.append(&body(8, 448)), Ok(8));
    assert_eq!(
        log.append(&body(9, 448)),
        Err(AppendError::LogFull { chunk_count: 3 })
    );
    let ids: Vec<u64> = recovered(&mut log).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [3, 4, 5, 6, 7, 8]);
    assert_eq!(log.release(100), 3);
    assert!(recovered(&mut log).is_empty());
}

#[test]
fn a_reused_chunk_never_shows_entries_of_its_previous_use() {
    // One chunk, so the reuse is certain. Entries of 64 + 64 bytes: the old entries 2..=8
    // sit exactly where headers of the new use fall.
    let mut log =
        RingBuf::<_, _, 64>::format(HeapRegion::new(SUPERBLOCK_SPACE + CHUNK), Eadr, CHUNK, 1)
            .unwrap();
    for id in 1..=8 {
        assert_eq!(log.append(&body(id, 64)), Ok(id));
    }
    assert_eq!(log.release(9), 1);
    assert_eq!(log.append(&body(9, 64)), Ok(9));
    assert_eq!(recovered(&mut log), [(9, body(9, 64))]);
    // The same after a restart.
    let (region, access) = log.into_parts();
    let mut log = RingBuf::<_, _, 64>::open(region, access, 1).unwrap();
    assert_eq!(recovered(&mut log), [(9, body(9, 64))]);
}
