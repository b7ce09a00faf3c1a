//! Transactions on a pool in DRAM: what commits stays, what aborts leaves nothing, and
//! every commit keeps checksums and parity consistent (a clean scrub).

mod common;

use std::collections::BTreeMap;

use common::{body, contents, format, small, verified, wide, Contents};
use persim_pangolin::{OpenError, Pool, TxError, PAGE};
use persim_ringbuf::{Eadr, HeapRegion};
use proptest::prelude::*;

#[test]
fn committed_transactions_survive_a_reopen_and_aborted_ones_leave_nothing() {
    let pool = format(small());
    let root = pool.root();
    let mut tx = pool.begin();
    let a = tx.alloc(100, 7).unwrap();
    tx.open(a).unwrap().copy_from_slice(&body(1, 100));
    tx.add_range(root, 0, 8)
        .unwrap()
        .copy_from_slice(&a.to_le_bytes());
    tx.commit().unwrap();
    let before = contents(&pool);
    let image = pool.into_region();
    let pool = Pool::open(image, Eadr).unwrap();
    assert_eq!(contents(&pool), before);
    assert_eq!(&pool.get(root).unwrap()[..8], &a.to_le_bytes());

    let mut tx = pool.begin();
    let b = tx.alloc(50, 1).unwrap();
    tx.open(b).unwrap().fill(9);
    tx.add_range(a, 10, 5).unwrap().fill(0);
    assert_eq!(
        &tx.read(a).unwrap()[10..15],
        &[0; 5],
        "a transaction sees its writes"
    );
    drop(tx);
    assert_eq!(
        contents(&pool),
        before,
        "an aborted transaction changed nothing"
    );
    // Allocation is next-fit from a volatile cursor: a reopened pool searches from the start.
    let mut pool = Pool::open(pool.into_region(), Eadr).unwrap();
    let mut tx = pool.begin();
    assert_eq!(tx.alloc(50, 1).unwrap(), b, "its allocation was not kept");
    drop(tx);
    assert!(pool.scrub().is_clean());
}

#[test]
fn a_freed_object_is_gone_and_its_space_reused() {
    let pool = format(small());
    let mut tx = pool.begin();
    let a = tx.alloc(300, 1).unwrap();
    tx.commit().unwrap();
    let mut tx = pool.begin();
    tx.free(a).unwrap();
    assert_eq!(tx.open(a).unwrap_err(), TxError::BadObject(a));
    tx.commit().unwrap();
    assert_eq!(pool.get(a).unwrap_err(), TxError::BadObject(a));
    assert_eq!(pool.objects(), [pool.root()]);
    let mut pool = Pool::open(pool.into_region(), Eadr).unwrap();
    let mut tx = pool.begin();
    assert_eq!(tx.alloc(200, 1).unwrap(), a);
    tx.commit().unwrap();
    assert!(pool.scrub().is_clean());
}

#[test]
fn bad_requests_are_refused_with_what_to_do() {
    let pool = format(small());
    let root = pool.root();
    let mut tx = pool.begin();
    assert!(matches!(
        tx.add_range(root, 60, 8),
        Err(TxError::OutOfObject { .. })
    ));
    assert_eq!(
        tx.open(root + 64).unwrap_err(),
        TxError::BadObject(root + 64)
    );
    assert_eq!(tx.open(3).unwrap_err(), TxError::BadObject(3));
    assert_eq!(
        tx.alloc(1 << 20, 1).unwrap_err(),
        TxError::OutOfSpace(1 << 20)
    );
    assert_eq!(tx.alloc(8, u32::MAX).unwrap_err(), TxError::ReservedType);
    drop(tx);
    let before = contents(&pool);
    let mut tx = pool.begin();
    let big = tx.alloc(9000, 1).unwrap();
    tx.open(big).unwrap().fill(1);
    assert!(
        matches!(tx.commit(), Err(TxError::LogFull(_))),
        "a log copy holds 8 KiB"
    );
    assert_eq!(contents(&pool), before);
    assert!(matches!(
        Pool::open(HeapRegion::new(small().1), Eadr),
        Err(OpenError::NotFormatted)
    ));
}

#[test]
fn an_overrun_of_a_micro_buffer_aborts_the_transaction() {
    for end in [false, true] {
        let pool = format(small());
        let root = pool.root();
        let before = contents(&pool);
        let mut tx = pool.begin();
        tx.open(root).unwrap().fill(5);
        let buffer = tx.buffer_mut(root).unwrap();
        let ptr = buffer.data_ptr();
        // SAFETY: the canary words before and after the data are inside the buffer.
        unsafe { *if end { ptr.add(64) } else { ptr.sub(1) } ^= 0x40 };
        assert_eq!(tx.commit(), Err(TxError::Canary(root)));
        assert_eq!(contents(&pool), before);
    }
}

#[test]
fn a_lost_metadata_copy_is_rewritten_at_open_and_both_lost_refuse() {
    let pool = format(small());
    let mut image = pool.into_region();
    let good = image.as_slice().to_vec();
    image.as_mut_slice()[..PAGE as usize].fill(0);
    let pool = Pool::open(image, Eadr).unwrap();
    let mut image = pool.into_region();
    assert_eq!(image.as_slice(), &good[..]);
    image.as_mut_slice()[PAGE as usize + 20] ^= 1;
    image.as_mut_slice()[20] ^= 1;
    assert!(matches!(
        Pool::open(image, Eadr),
        Err(OpenError::CorruptMetadata)
    ));
}

/// One operation of a random workload; indices pick among the live objects.
#[derive(Clone, Debug)]
enum Op {
    Alloc(u64),
    Write {
        pick: usize,
        at: usize,
        len: usize,
        seed: u64,
    },
    Free(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..2000).prop_map(Op::Alloc),
        (any::<usize>(), any::<usize>(), 0usize..300, any::<u64>()).prop_map(
            |(pick, at, len, seed)| Op::Write {
                pick,
                at,
                len,
                seed
            }
        ),
        any::<usize>().prop_map(Op::Free),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random transactions against a model: the pool holds exactly the model's objects
    /// after every commit, after a reopen, and scrubbing finds nothing to fix (checksums
    /// updated incrementally match, parity matches the data).
    #[test]
    fn the_pool_follows_a_model(txs in proptest::collection::vec(proptest::collection::vec(op(), 1..5), 1..12)) {
        let pool = format(wide());
        let mut model: Contents = contents(&pool);
        for ops in txs {
            let mut next = model.clone();
            let mut tx = pool.begin();
            for op in ops {
                let live: Vec<u64> = next.keys().copied().collect();
                match op {
                    Op::Alloc(size) => match tx.alloc(size, 3) {
                        Ok(oid) => {
                            next.insert(oid, vec![0; size as usize]);
                        }
                        Err(TxError::OutOfSpace(_)) => {}
                        Err(e) => panic!("{e}"),
                    },
                    Op::Write { pick, at, len, seed } => {
                        let oid = live[pick % live.len()];
                        let data = next.get_mut(&oid).unwrap();
                        let at = at % (data.len() + 1);
                        let len = len.min(data.len() - at);
                        let bytes = body(seed, len);
                        tx.add_range(oid, at as u64, len as u64).unwrap().copy_from_slice(&bytes);
                        data[at..at + len].copy_from_slice(&bytes);
                    }
                    Op::Free(pick) => {
                        let oid = live[pick % live.len()];
                        if oid != pool_root(&next) {
                            tx.free(oid).unwrap();
                            next.remove(&oid);
                        }
                    }
                }
            }
            match tx.commit() {
                Ok(()) => model = next,
                Err(TxError::LogFull(_)) => {}
                Err(e) => panic!("{e}"),
            }
            prop_assert_eq!(&contents(&pool), &model);
        }
        let image = pool.into_region();
        let mut pool = Pool::open(image, Eadr).unwrap();
        prop_assert_eq!(&verified(&mut pool).unwrap(), &model);
        prop_assert_eq!(pool.repairs(), 0);
        prop_assert!(pool.scrub().is_clean());
    }
}

/// The root is the first object the format allocated: the lowest id.
fn pool_root(model: &BTreeMap<u64, Vec<u8>>) -> u64 {
    *model.keys().next().unwrap()
}
