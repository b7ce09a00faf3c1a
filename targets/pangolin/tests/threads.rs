//! Threads sharing one pool, each running its own transactions: on objects whose parity
//! is the same bytes (one page column), and allocating and freeing at once. Every object
//! must hold what its thread wrote, pass its checksum, and parity must match (a clean
//! scrub), also after reopening. Without atomic XOR, or without the column lock of large
//! updates, concurrent parity updates lose each other's changes and the scrub says so.

use persim_pangolin::{Geometry, PmAccess, Pool, PAGE};
use persim_ringbuf::{Eadr, HeapRegion};

const THREADS: usize = 4;

/// eADR stores that let other threads run before each partial store: a read-modify-write
/// of parity that is not atomic then loses another thread's change almost every time,
/// not once in a while; atomic XORs lose none however the threads interleave.
struct Yielding;

impl PmAccess for Yielding {
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: forwarded from our caller.
        unsafe { Eadr.store(base, offset, src) }
    }

    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        std::thread::yield_now();
        // SAFETY: forwarded from our caller.
        unsafe { Eadr.store_part(base, offset, src) }
    }

    fn fence(&self) {
        Eadr.fence();
    }
}

/// One-page chunks, 9 rows (8 data rows), 4 lanes of two 2-page log copies: 27 pages.
fn shared_pool() -> Pool<HeapRegion, Yielding> {
    let geometry = Geometry {
        pool_len: 0,
        chunk_size: PAGE,
        rows: 9,
        log_size: 2 * PAGE,
        lanes: THREADS as u64,
    };
    Pool::format(HeapRegion::new(27 * PAGE as usize), Yielding, geometry, 0).unwrap()
}

/// A small deterministic generator per thread (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Objects of a row less their header, each from unit 3 of a row (after the bitmap): the
/// same offsets of every object update the same parity bytes.
const OBJECT: u64 = PAGE - 16;

#[test]
fn threads_updating_objects_of_one_page_column_keep_checksums_and_parity() {
    let pool = shared_pool();
    let mut tx = pool.begin();
    let oids: Vec<u64> = (0..7).map(|_| tx.alloc(OBJECT, 1).unwrap()).collect();
    tx.commit().unwrap();
    for pair in oids.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            PAGE,
            "one object a row, all in one column"
        );
    }
    let models: Vec<Vec<(u64, Vec<u8>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (pool, oids) = (&pool, &oids);
                s.spawn(move || {
                    // This thread's objects, isolated by ownership (no other thread's).
                    let mut mine: Vec<(u64, Vec<u8>)> = (t..oids.len())
                        .step_by(THREADS)
                        .map(|k| (oids[k], vec![0; OBJECT as usize]))
                        .collect();
                    let mut rng = Rng(t as u64 * 7919 + 1);
                    for i in 0..3000 {
                        let k = i % mine.len();
                        let (oid, model) = &mut mine[k];
                        // Mostly small updates (atomic XOR), every fourth a large one (the
                        // column lock), all over the first 2 KiB, where every thread writes.
                        let len = if i % 4 == 3 { 1024 } else { 8 + rng.below(248) };
                        let at = rng.below(2048 - len);
                        let mut tx = pool.begin();
                        let range = tx.add_range(*oid, at, len).unwrap();
                        for byte in range.iter_mut() {
                            *byte = rng.next() as u8;
                        }
                        model[at as usize..(at + len) as usize].copy_from_slice(range);
                        tx.commit().unwrap();
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let check = |pool: &mut Pool<HeapRegion, Yielding>| {
        for (oid, model) in models.iter().flatten() {
            assert_eq!(pool.get(*oid).unwrap(), &model[..], "object {oid}");
        }
        let report = pool.scrub();
        assert!(report.is_clean(), "{report:?}");
    };
    let mut pool = pool;
    check(&mut pool);
    let mut pool = Pool::open(pool.into_region(), Yielding).unwrap();
    check(&mut pool);
}

#[test]
fn threads_allocating_and_freeing_at_once_get_distinct_objects() {
    let pool = shared_pool();
    let kept: Vec<Vec<(u64, u8)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    let mut rng = Rng(t as u64 + 99);
                    let mut mine: Vec<(u64, u8)> = Vec::new();
                    for i in 0..400 {
                        let mut tx = pool.begin();
                        let victim = (mine.len() > 6 || (i % 3 == 2 && !mine.is_empty()))
                            .then(|| rng.below(mine.len() as u64) as usize);
                        if let Some(k) = victim {
                            tx.free(mine[k].0).unwrap();
                        }
                        let size = 16 + rng.below(200);
                        let oid = tx.alloc(size, t as u32).unwrap();
                        let tag = (t * 64 + i % 64) as u8;
                        tx.open(oid).unwrap().fill(tag);
                        if i % 5 == 4 {
                            // Aborted (dropped): its units go back, its free never happens.
                            continue;
                        }
                        tx.commit().unwrap();
                        if let Some(k) = victim {
                            mine.swap_remove(k);
                        }
                        mine.push((oid, tag));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut pool = pool;
    let all: Vec<(u64, u8)> = kept.into_iter().flatten().collect();
    let mut oids: Vec<u64> = all.iter().map(|&(oid, _)| oid).collect();
    oids.sort_unstable();
    assert_eq!(pool.objects(), oids, "exactly the objects kept, none twice");
    for (oid, tag) in all {
        assert!(
            pool.get(oid).unwrap().iter().all(|&b| b == tag),
            "object {oid}"
        );
    }
    let report = pool.scrub();
    assert!(report.is_clean(), "{report:?}");
}
