//! Pools, workloads and readers shared by the integration tests.

#![allow(dead_code)] // Each test binary uses part of this module.

use std::collections::BTreeMap;

use persim_pangolin::{Geometry, PmAccess, Pool, TxError, PAGE};
use persim_ringbuf::{Eadr, HeapRegion};

/// Objects by id and their data.
pub type Contents = BTreeMap<u64, Vec<u8>>;

/// One-page chunks, 4 rows a zone, two zones: 14 pages.
pub fn small() -> (Geometry, usize) {
    let geometry = Geometry {
        pool_len: 0,
        chunk_size: PAGE,
        rows: 4,
        log_size: 2 * PAGE,
        lanes: 1,
    };
    (geometry, 14 * PAGE as usize)
}

/// Two-page chunks, 5 rows a zone, two zones: 38 pages, zones from page 18.
pub fn wide() -> (Geometry, usize) {
    let geometry = Geometry {
        pool_len: 0,
        chunk_size: 2 * PAGE,
        rows: 5,
        log_size: 8 * PAGE,
        lanes: 1,
    };
    (geometry, 38 * PAGE as usize)
}

pub fn format((geometry, len): (Geometry, usize)) -> Pool<HeapRegion, Eadr> {
    Pool::format(HeapRegion::new(len), Eadr, geometry, 64).expect("the geometry is valid")
}

/// Bytes that differ by seed and are never zero.
pub fn body(seed: u64, len: usize) -> Vec<u8> {
    persim_crash_check::body(seed, len)
}

/// Every object and its data, read directly (no verification).
pub fn contents<R: persim_pangolin::Region, A: PmAccess>(pool: &Pool<R, A>) -> Contents {
    pool.objects()
        .into_iter()
        .map(|oid| (oid, pool.get(oid).expect("listed").to_vec()))
        .collect()
}

/// Every object's data as a transaction opens it: verified, and repaired if it must be.
pub fn verified<R: persim_pangolin::Region, A: PmAccess>(
    pool: &mut Pool<R, A>,
) -> Result<Contents, TxError> {
    let mut out = Contents::new();
    for oid in pool.objects() {
        let mut tx = pool.begin();
        tx.add_range(oid, 0, 0)?;
        out.insert(oid, tx.read(oid)?.to_vec());
    }
    Ok(out)
}

/// Object sizes that fill a [`wide`] pool's first zone and put a 20000-byte object first in
/// its second (pages 28 to 32).
pub const WIDE_SIZES: [u64; 9] = [100, 3000, 700, 5000, 64, 9000, 1500, 20000, 6000];
/// Object sizes for a [`small`] pool: some cross rows, the last lands in the second zone.
pub const SMALL_SIZES: [u64; 7] = [100, 3000, 700, 5000, 64, 1500, 3000];

/// A pool with objects of `sizes` (the third freed again, leaving stale data in free
/// space): the state the fault tests damage.
pub fn populated(shape: (Geometry, usize), sizes: &[u64]) -> Pool<HeapRegion, Eadr> {
    let pool = format(shape);
    let mut oids = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let mut tx = pool.begin();
        let oid = tx.alloc(size, i as u32).unwrap();
        tx.open(oid)
            .unwrap()
            .copy_from_slice(&body(i as u64 + 1, size as usize));
        tx.commit().unwrap();
        oids.push(oid);
    }
    let mut tx = pool.begin();
    tx.free(oids[2]).unwrap();
    tx.commit().unwrap();
    pool
}
