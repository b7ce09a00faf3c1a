//! Media faults and scribbles, injected into the bytes of a closed pool as `persim faults`
//! injects them (a zeroed page stands in for a poisoned one): a flipped bit in any object
//! is detected, a lost page anywhere or a scribble up to a chunk row less a line is repaired,
//! two lost pages of one page column are detected.

mod common;

use common::{contents, populated, small, verified, wide, Contents, SMALL_SIZES, WIDE_SIZES};
use persim_pangolin::{Pool, TxError, LINE, OBJ_HEADER, PAGE};
use persim_ringbuf::{Eadr, HeapRegion};
use proptest::prelude::*;

/// The populated wide pool's image and contents.
fn pristine() -> (Vec<u8>, Contents) {
    let pool = populated(wide(), &WIDE_SIZES);
    let objects = contents(&pool);
    (pool.into_region().as_slice().to_vec(), objects)
}

fn damaged(image: &[u8], damage: impl FnOnce(&mut [u8])) -> HeapRegion {
    let mut region = HeapRegion::new(image.len());
    region.as_mut_slice().copy_from_slice(image);
    damage(region.as_mut_slice());
    region
}

/// Opens the damaged pool, reads every object verified, scrubs, and checks that the
/// objects are as before and a second scrub finds nothing.
fn assert_repaired(image: &[u8], objects: &Contents, region: HeapRegion, what: &str) {
    let mut pool = Pool::open(region, Eadr).unwrap_or_else(|e| panic!("{what}: open: {e}"));
    assert_eq!(
        &verified(&mut pool).unwrap_or_else(|e| panic!("{what}: {e}")),
        objects,
        "{what}"
    );
    let report = pool.scrub();
    assert!(report.lost.is_empty(), "{what}: {report:?}");
    assert!(pool.scrub().is_clean(), "{what}: a second scrub found more");
    assert_eq!(&contents(&pool), objects, "{what}");
    assert_eq!(pool.into_region().as_slice().len(), image.len());
}

#[test]
fn a_flipped_bit_in_any_object_byte_is_detected_and_repaired() {
    let (image, objects) = pristine();
    for (&oid, data) in &objects {
        for byte in 0..OBJ_HEADER + data.len() as u64 {
            let region = damaged(&image, |bytes| {
                bytes[(oid + byte) as usize] ^= 1 << (byte % 8)
            });
            let pool = Pool::open(region, Eadr).unwrap();
            let mut tx = pool.begin();
            let read = tx.open(oid).map(|data| data.to_vec());
            drop(tx);
            assert_eq!(read.as_ref(), Ok(data), "object {oid:#x} byte {byte}");
            assert_eq!(pool.repairs(), 1, "object {oid:#x} byte {byte}");
        }
    }
}

#[test]
fn a_lost_page_anywhere_is_repaired() {
    // One-page rows too: there a lost page ends where the same columns of the next row
    // begin, inside objects that cross rows.
    let small = populated(small(), &SMALL_SIZES);
    assert!(
        small.objects().iter().any(|&oid| oid >= 10 * PAGE),
        "the second zone is used"
    );
    let small = (contents(&small), small.into_region().as_slice().to_vec());
    for (objects, image) in [small, {
        let (i, o) = pristine();
        (o, i)
    }] {
        for page in 0..image.len() / PAGE as usize {
            let region = damaged(&image, |bytes| {
                bytes[page * PAGE as usize..][..PAGE as usize].fill(0)
            });
            assert_repaired(&image, &objects, region, &format!("page {page}"));
        }
    }
}

#[test]
fn two_lost_pages_of_one_column_are_detected() {
    let (image, objects) = pristine();
    // Wide pools: 2-page chunks, 5 rows; zone 1 starts at page 28, its 20000-byte object
    // spans rows 0 to 2 (pages 28 to 32), its parity row is pages 36 and 37.
    let (&oid, _) = objects.iter().find(|(&oid, _)| oid >= 28 * PAGE).unwrap();
    assert_eq!(
        oid / PAGE,
        28,
        "the object starts the zone's data after its bitmap"
    );
    for (a, b) in [(29, 31), (31, 37), (30, 36)] {
        let region = damaged(&image, |bytes| {
            for page in [a, b] {
                bytes[page * PAGE as usize..][..PAGE as usize].fill(0);
            }
        });
        let mut pool = Pool::open(region, Eadr).unwrap();
        let mut tx = pool.begin();
        assert_eq!(
            tx.open(oid).map(|_| ()),
            Err(TxError::Unrepairable(oid)),
            "pages {a}, {b}"
        );
        drop(tx);
        assert_eq!(pool.scrub().lost, [oid], "pages {a}, {b}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A scribble up to a chunk row (2 pages here) less a line, anywhere in the zones.
    #[test]
    fn a_scribble_up_to_a_chunk_row_is_repaired(at in 18 * PAGE..38 * PAGE, len in 1..=2 * PAGE - LINE, seed: u64) {
        let (image, objects) = pristine();
        let len = len.min(38 * PAGE - at);
        let region = damaged(&image, |bytes| {
            let junk = common::body(seed, len as usize);
            bytes[at as usize..(at + len) as usize].copy_from_slice(&junk);
        });
        assert_repaired(&image, &objects, region, &format!("{len} bytes at {at:#x}"));
    }
}

/// What `open` repairs before any scrub (a metadata copy, a zone's bitmap) and the parity
/// pages a scrub rewrites count as repairs: the tools report them from `repairs`, and a
/// fault they undid is `corrected`, not `masked`.
#[test]
fn repairs_made_at_open_and_parity_rewrites_are_counted() {
    let (image, objects) = pristine();
    // The wide pool: metadata pages 0 and 1, logs to page 18, zone 0's bitmap at page 18,
    // its parity row pages 26 and 27.
    for (what, at) in [
        ("metadata copy", PAGE as usize + 9),
        ("bitmap", 18 * PAGE as usize + 20),
        ("parity", 26 * PAGE as usize + 3),
    ] {
        let region = damaged(&image, |bytes| bytes[at] ^= 0x10);
        let mut pool = Pool::open(region, Eadr).unwrap();
        let at_open = pool.repairs();
        let report = pool.scrub();
        assert!(report.lost.is_empty(), "{what}: {report:?}");
        assert_eq!(pool.repairs(), 1, "{what}: {report:?}, {at_open} at open");
        assert_eq!(&contents(&pool), &objects, "{what}");
    }
}
