//! The key-value consumer: every acknowledged put survives a crash, in order, through the
//! last committed txg and the claimed log; a crash during replay resumes without applying
//! an entry twice.

use std::collections::BTreeMap;
use std::path::Path;

use persim_ringbuf::{Eadr, HeapRegion};
use persim_zil_pmem::kv::{KvError, KvStore};
use persim_zil_pmem::{Position, SUPERBLOCK_SPACE};

const CHUNK: usize = 2048;
const EVERY: usize = 5;

type Store = KvStore<HeapRegion, Eadr>;

fn create(path: &Path, chunks: usize) -> Store {
    let region = HeapRegion::new(SUPERBLOCK_SPACE + chunks * CHUNK);
    KvStore::create(path, region, Eadr, CHUNK, EVERY, (0xa1, 0xb2)).unwrap()
}

/// Puts with overwrites: key i % 7, value naming the put.
fn puts(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let key = format!("key-{}", i % 7).into_bytes();
            let value = format!("value of put {i} ").repeat(i % 13 + 1).into_bytes();
            (key, value)
        })
        .collect()
}

fn model(puts: &[(Vec<u8>, Vec<u8>)]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    puts.iter().cloned().collect()
}

#[test]
fn every_acknowledged_put_survives_a_crash_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    for n in [0, 1, 4, 5, 6, 23, 40] {
        let mut store = create(&path, 8);
        let puts = puts(n);
        for (k, v) in &puts {
            store.put(k, v).unwrap();
        }
        let committed = store.committed_txg();
        let region = store.crash();
        let (store, recovery) = Store::recover(&path, region, Eadr, EVERY, None).unwrap();
        assert_eq!(recovery.committed_txg, committed);
        // The puts after the last commit come from the log, one entry each.
        assert_eq!(recovery.replayed.len(), n % EVERY, "{n} puts");
        assert_eq!(store.map(), &model(&puts), "{n} puts");
    }
}

#[test]
fn a_full_log_makes_puts_durable_by_committing_their_txg() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    // Two small chunks: the log fills before EVERY puts, so the txg commits early.
    let mut store = create(&path, 2);
    let puts = puts(30);
    for (k, v) in &puts {
        store.put(k, v).unwrap();
    }
    let region = store.crash();
    let (mut store, _) = Store::recover(&path, region, Eadr, EVERY, None).unwrap();
    assert_eq!(store.map(), &model(&puts));
    // And it keeps working after the recovery.
    store.put(b"after", b"recovery").unwrap();
    let region = store.crash();
    let (store, _) = Store::recover(&path, region, Eadr, EVERY, None).unwrap();
    assert_eq!(store.get(b"after"), Some(&b"recovery"[..]));
}

#[test]
fn a_crash_during_replay_resumes_without_applying_an_entry_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let puts = puts(EVERY * 3 + 4);
    // Four puts after the last commit: crash before applying the first to the fourth.
    for stop in 0..4 {
        let mut store = create(&path, 16);
        for (k, v) in &puts {
            store.put(k, v).unwrap();
        }
        let region = store.crash();
        // The first recovery crashes (on a copy of the PM region: replay writes no PM).
        let err = Store::recover(&path, copy(&region), Eadr, EVERY, Some(stop))
            .err()
            .unwrap();
        assert!(matches!(err, KvError::Interrupted(n) if n == stop), "{err}");
        let (store, recovery) = Store::recover(&path, region, Eadr, EVERY, None).unwrap();
        assert!(recovery.resumed == (stop > 0), "stop {stop}");
        let all: Vec<Position> = (1..=4)
            .map(|gen| Position {
                gen: 15 + gen,
                id: 1,
            })
            .collect();
        assert_eq!(recovery.replayed, all[stop..], "stop {stop}");
        assert_eq!(store.map(), &model(&puts), "stop {stop}");
        // A crash right after the recovery replays nothing again.
        let region = store.crash();
        let (store, recovery) = Store::recover(&path, region, Eadr, EVERY, None).unwrap();
        assert!(recovery.replayed.is_empty(), "stop {stop}");
        assert_eq!(store.map(), &model(&puts));
    }
}

/// What the map hides, a restart's claim shows: a chunk reused over stale entries it did
/// not end (no zeroed next header), and, after a recovery whose txg commit freed every
/// chunk it claimed, chunks still in use (no zeroed first header). Each zeroing mutant
/// (docs/design/zil-pmem.md) breaks one, and `zil-pmem-tool recover --check` reports it.
#[test]
fn a_restart_shows_chunks_mixing_uses_and_freed_chunks_still_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut store = create(&path, 4);
    // Entries of 512 bytes, four a chunk: puts 1-4 fill one, put 5 (the next chunk)
    // commits txg 1 and frees the full one, put 9 reuses it over three stale entries.
    let puts: Vec<_> = (1..=9)
        .map(|k| (format!("key-{k}").into_bytes(), vec![b'v'; 200]))
        .collect();
    for (k, v) in &puts {
        store.put(k, v).unwrap();
    }
    let (region, access) = store.stop();
    let (store, first) = Store::recover(&path, region, access, EVERY, None).unwrap();
    assert_eq!(first.replayed.len(), 4);
    assert!(first.chunks_in_use > 0);
    let (region, access) = store.stop();
    let (store, second) = Store::recover(&path, region, access, EVERY, None).unwrap();
    assert_eq!(store.map(), &model(&puts));
    let mixed = cfg!(feature = "mutant-no-zero-next-header");
    assert_eq!(!first.mixed_chunks.is_empty(), mixed, "{first:?}");
    assert!(second.mixed_chunks.is_empty(), "{second:?}");
    let kept = cfg!(feature = "mutant-no-zero-freed-chunk");
    assert_eq!(second.chunks_in_use > 0, kept, "{second:?}");
}

fn copy(region: &HeapRegion) -> HeapRegion {
    let mut copy = HeapRegion::new(region.as_slice().len());
    copy.as_mut_slice().copy_from_slice(region.as_slice());
    copy
}
