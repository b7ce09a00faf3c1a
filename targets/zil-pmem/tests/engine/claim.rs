//! What claim keeps and frees.

use persim_zil_pmem::{entry_len, Position, HEADER_SIZE};

use crate::{body, new_log, reopen, replay_all};

#[test]
fn replay_returns_every_entry_in_order_after_a_restart() {
    let log = new_log(4096, 4, 2);
    let mut written = Vec::new();
    for (i, len) in [0, 1, 300, 3000, 17, 256].into_iter().enumerate() {
        let b = body(i as u64, len);
        written.push((log.append(1, 1, &b, true).unwrap(), b));
    }
    let (mut log, claim) = reopen(log.into_region(), 0);
    assert_eq!(claim.max_txg, 1);
    let (applied, result) = replay_all(&mut log, &claim);
    result.unwrap();
    assert_eq!(applied, written);
    // Appends continue after the replayed generations.
    let next = log.append(1, 2, b"after", true).unwrap();
    assert!(next > written.last().unwrap().0);
}

/// The original ZIL-PMEM reader wants room for a header after the last entry; an entry
/// the writer placed exactly at the chunk's end must not be lost at claim.
#[test]
fn an_entry_ending_exactly_at_the_chunk_end_is_claimed() {
    let chunk = 1024;
    let log = new_log(chunk, 1, 1);
    let fill = chunk / 2 - HEADER_SIZE;
    assert_eq!(2 * entry_len(fill), chunk);
    let first = log.append(1, 1, &body(1, fill), true).unwrap();
    let last = log.append(1, 1, &body(2, fill), true).unwrap();
    let (mut log, claim) = reopen(log.into_region(), 0);
    let (applied, result) = replay_all(&mut log, &claim);
    result.unwrap();
    let positions: Vec<Position> = applied.iter().map(|(p, _)| *p).collect();
    assert_eq!(positions, [first, last]);
}

#[test]
fn claim_keeps_only_entries_of_unsynced_txgs() {
    let log = new_log(1024, 8, 1);
    for txg in 1..=4u64 {
        log.append(1, txg, &body(txg, 100), true).unwrap();
    }
    let (mut log, claim) = reopen(log.into_region(), 2);
    assert_eq!(claim.claim_txg, 3);
    let (applied, result) = replay_all(&mut log, &claim);
    result.unwrap();
    assert_eq!(
        applied.iter().map(|(_, b)| b.clone()).collect::<Vec<_>>(),
        [body(3, 100), body(4, 100)]
    );
}

#[test]
fn a_synced_txg_frees_its_full_chunks_and_zeroes_their_first_header() {
    let log = new_log(512, 4, 1);
    // One 256-byte body fills a 512-byte chunk: each append takes a new chunk.
    for txg in 1..=3u64 {
        log.append(1, txg, &body(txg, 200), true).unwrap();
    }
    assert_eq!(log.free_chunks(), 1);
    log.txg_synced(1);
    // Chunk 0 (txg 1) is free again; chunk 2 is still being written.
    assert_eq!(log.free_chunks(), 2);
    log.txg_synced(3);
    assert_eq!(log.free_chunks(), 3);
    let region = log.into_region();
    let first_header = &region.as_slice()[persim_zil_pmem::SUPERBLOCK_SPACE..][..HEADER_SIZE];
    assert!(first_header.iter().all(|&b| b == 0));
    let (_, claim) = reopen(region, 3);
    assert!(claim.entries.is_empty());
}

#[test]
fn claiming_with_no_log_zeroes_and_frees_every_chunk() {
    let log = new_log(512, 3, 1);
    for txg in 1..=2u64 {
        log.append(1, txg, &body(txg, 200), true).unwrap();
    }
    let region = log.into_region();
    let mut log = persim_zil_pmem::ZilPmem::open(region, persim_ringbuf::Eadr, 1).unwrap();
    let mut header = crate::header();
    header.state = persim_zil_pmem::LogState::NoLog;
    let claim = log.claim(&header, 1).unwrap();
    assert!(claim.entries.is_empty());
    assert_eq!(log.free_chunks(), 3);
    let header = log.replay(&claim, |_, _| Ok::<(), ()>(())).unwrap();
    assert_eq!(header.state, persim_zil_pmem::LogState::Logging);
    // The old entries are gone for good: a later claim from txg 1 finds none.
    let (_, claim) = reopen(log.into_region(), 0);
    assert!(claim.entries.is_empty());
}
