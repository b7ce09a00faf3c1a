//! Several threads appending at once.

use std::collections::BTreeMap;
use std::sync::Mutex;

use persim_ringbuf::{AppendError, Eadr, HeapRegion, RingBuf, SUPERBLOCK_SPACE};

use crate::{body, recovered};

const THREADS: u64 = 4;
const PER_THREAD: u64 = 300;

/// Appends `PER_THREAD` entries of varied sizes from each of `THREADS` threads; on a full
/// log, releases everything full and retries. Returns every acknowledged (id, body).
fn append_concurrently(log: &RingBuf<HeapRegion, Eadr, 64>) -> BTreeMap<u64, Vec<u8>> {
    let acknowledged = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let acknowledged = &acknowledged;
            s.spawn(move || {
                for n in 0..PER_THREAD {
                    let data = body(
                        thread * PER_THREAD + n,
                        (n as usize * 37 + thread as usize) % 700,
                    );
                    let id = loop {
                        match log.append(&data) {
                            Ok(id) => break id,
                            Err(AppendError::LogFull { .. }) => {
                                log.release(u64::MAX);
                                std::thread::yield_now();
                            }
                            Err(e) => panic!("{e}"),
                        }
                    };
                    let old = acknowledged.lock().unwrap().insert(id, data);
                    assert!(old.is_none(), "id {id} handed out twice");
                }
            });
        }
    });
    acknowledged.into_inner().unwrap()
}

#[test]
fn concurrent_appends_get_unique_ids_and_all_are_recovered() {
    let region = HeapRegion::new(SUPERBLOCK_SPACE + 64 * 16384);
    let mut log = RingBuf::<_, _, 64>::format(region, Eadr, 16384, 3).unwrap();
    let acknowledged = append_concurrently(&log);
    assert_eq!(acknowledged.len() as u64, THREADS * PER_THREAD);
    let entries: BTreeMap<u64, Vec<u8>> = recovered(&mut log).into_iter().collect();
    assert_eq!(entries, acknowledged);
    // And after a restart.
    let (region, access) = log.into_parts();
    let mut log = RingBuf::<_, _, 64>::open(region, access, 3).unwrap();
    let entries: BTreeMap<u64, Vec<u8>> = recovered(&mut log).into_iter().collect();
    assert_eq!(entries, acknowledged);
}

#[test]
fn concurrent_appends_and_releases_keep_entries_intact() {
    // Small enough that the threads fill it many times over.
    let region = HeapRegion::new(SUPERBLOCK_SPACE + 8 * 4096);
    let mut log = RingBuf::<_, _, 64>::format(region, Eadr, 4096, 2).unwrap();
    let acknowledged = append_concurrently(&log);
    assert_eq!(acknowledged.len() as u64, THREADS * PER_THREAD);
    let entries = recovered(&mut log);
    assert!(!entries.is_empty());
    for (id, data) in &entries {
        assert_eq!(acknowledged.get(id), Some(data), "entry {id} intact");
    }
    // The newest entry is never in a released chunk.
    let newest = acknowledged.keys().last().unwrap();
    assert!(entries.iter().any(|(id, _)| id == newest));
}
