//! Damaged regions: torn and corrupted entries, broken superblocks, bad settings. Every
//! case is a result or an error value, never a panic.

use persim_ringbuf::{
    CorruptEntry, Eadr, HeapRegion, OpenError, Region, RingBuf, HEADER_SPACE, SUPERBLOCK_SPACE,
};

use crate::{body, recovered};

const CHUNK: usize = 4096;

/// A log of 64-byte alignment and 4 chunks in which chunk 0 holds entries 1..=3 of 100
/// bytes (at offsets 0, 192, 384) and entry 4, which fills it, and chunk 1 holds entry 5;
/// returned as its bare region.
fn written_region() -> HeapRegion {
    let log = RingBuf::<_, _, 64>::format(
        HeapRegion::new(SUPERBLOCK_SPACE + 4 * CHUNK),
        Eadr,
        CHUNK,
        1,
    )
    .unwrap();
    for seed in 1..=3 {
        log.append(&body(seed, 100)).unwrap();
    }
    // Fill the rest of chunk 0 so that entry 4 starts chunk 1.
    let rest = CHUNK - 3 * 192 - HEADER_SPACE;
    assert_eq!(log.append(&body(0, rest)), Ok(4));
    assert_eq!(log.append(&body(4, 100)), Ok(5));
    log.into_parts().0
}

fn reopen(region: HeapRegion) -> RingBuf<HeapRegion, Eadr, 64> {
    RingBuf::open(region, Eadr, 1).unwrap()
}

fn ids(log: &mut RingBuf<HeapRegion, Eadr, 64>) -> Vec<Result<u64, CorruptEntry>> {
    log.recover().map(|entry| entry.map(|e| e.id)).collect()
}

#[test]
fn a_damaged_body_is_reported_and_the_other_entries_still_recovered() {
    let mut region = written_region();
    region.as_mut_slice()[SUPERBLOCK_SPACE + 192 + HEADER_SPACE + 50] ^= 1;
    let mut log = reopen(region);
    let items = ids(&mut log);
    assert_eq!(items[0], Ok(1));
    assert!(
        matches!(
            items[1],
            Err(CorruptEntry::BodyChecksum {
                id: 2,
                chunk: 0,
                offset: 192,
                ..
            })
        ),
        "{:?}",
        items[1]
    );
    assert_eq!(items[2..], [Ok(3), Ok(4), Ok(5)]);
}

#[test]
fn recovery_stops_at_a_zeroed_header() {
    let mut region = written_region();
    let at = SUPERBLOCK_SPACE + 192;
    region.as_mut_slice()[at..at + HEADER_SPACE].fill(0);
    let mut log = reopen(region);
    assert_eq!(ids(&mut log), [Ok(1), Ok(5)]);
}

#[test]
fn recovery_stops_at_a_torn_header() {
    let mut region = written_region();
    // The header's second 8-byte unit reverted to zero, as a crash can leave it.
    let at = SUPERBLOCK_SPACE + 384 + 8;
    region.as_mut_slice()[at..at + 8].fill(0);
    let mut log = reopen(region);
    assert_eq!(ids(&mut log), [Ok(1), Ok(2), Ok(5)]);
}

#[test]
fn a_torn_header_with_its_length_is_a_tail_only_before_a_zero_slot() {
    // Entry 3's id word lost, its length and checksum words written: what a crash can
    // leave of the chunk's last append, as long as the slot after it is zero.
    let torn_id = |region: &mut HeapRegion, at: usize| region.as_mut_slice()[at..at + 8].fill(0);
    let mut region = written_region();
    torn_id(&mut region, SUPERBLOCK_SPACE + 384);
    let after = SUPERBLOCK_SPACE + 576;
    region.as_mut_slice()[after..CHUNK + SUPERBLOCK_SPACE].fill(0);
    assert_eq!(ids(&mut reopen(region)), [Ok(1), Ok(2), Ok(5)]);
    // With entry 4 after it, no crash left it: the header was damaged.
    let mut region = written_region();
    torn_id(&mut region, SUPERBLOCK_SPACE + 384);
    let mut log = reopen(region);
    assert_eq!(
        ids(&mut log),
        [
            Ok(1),
            Ok(2),
            Err(CorruptEntry::DamagedHeader {
                chunk: 0,
                offset: 384
            }),
            Ok(5)
        ]
    );
}

#[test]
fn a_damaged_first_header_is_reported_and_its_chunk_kept() {
    let mut region = written_region();
    region.as_mut_slice()[SUPERBLOCK_SPACE + CHUNK + 3] ^= 0x10;
    let mut log = reopen(region);
    let damaged = CorruptEntry::DamagedHeader {
        chunk: 1,
        offset: 0,
    };
    // Its id unknown, it comes first.
    let items = ids(&mut log);
    assert_eq!(items[0], Err(damaged.clone()));
    assert_eq!(items[1..], [Ok(1), Ok(2), Ok(3), Ok(4)]);
    assert!(damaged.to_string().contains("damaged"), "{damaged}");
    // Appends go to a free chunk, not over the damaged one.
    assert_eq!(log.append(b"new"), Ok(5));
    assert_eq!(ids(&mut log)[..2], [Err(damaged), Ok(1)]);
    assert_eq!(ids(&mut log).last(), Some(&Ok(5)));
}

#[test]
fn a_header_whose_body_overruns_the_chunk_is_reported() {
    // Re-encode entry 1's header with a body length past the end of the chunk. The header
    // layout is private, so take a valid header of that length from another log.
    let donor =
        RingBuf::<_, _, 64>::format(HeapRegion::new(SUPERBLOCK_SPACE + 2 * 8192), Eadr, 8192, 1)
            .unwrap();
    donor.append(&body(1, 5000)).unwrap();
    let donor = donor.into_parts().0;
    let mut region = written_region();
    let header = SUPERBLOCK_SPACE..SUPERBLOCK_SPACE + HEADER_SPACE;
    region.as_mut_slice()[header.clone()].copy_from_slice(&donor.as_slice()[header]);
    let mut log = reopen(region);
    let items = ids(&mut log);
    assert_eq!(
        items[0],
        Err(CorruptEntry::LengthOutOfChunk {
            id: 1,
            chunk: 0,
            offset: 0,
            len: 5000
        })
    );
    assert_eq!(items[1..], [Ok(5)]);
    // The damaged chunk counts as used: new entries go elsewhere and get fresh ids.
    assert_eq!(log.append(b"new"), Ok(6));
}

#[test]
fn ids_continue_after_the_highest_surviving_entry() {
    let mut region = written_region();
    let at = SUPERBLOCK_SPACE + CHUNK;
    region.as_mut_slice()[at..at + HEADER_SPACE].fill(0);
    let mut log = reopen(region);
    assert_eq!(log.append(b"x"), Ok(5));
    assert_eq!(recovered(&mut log).last(), Some(&(5, b"x".to_vec())));
}

#[test]
fn open_rejects_what_format_did_not_write() {
    let blank = HeapRegion::new(SUPERBLOCK_SPACE + 4 * CHUNK);
    assert_eq!(
        RingBuf::<_, _, 64>::open(blank, Eadr, 1).err(),
        Some(OpenError::NotFormatted)
    );

    let mut damaged = written_region();
    damaged.as_mut_slice()[20] ^= 1;
    assert_eq!(reopen_err::<64>(damaged), OpenError::CorruptSuperblock);

    assert_eq!(
        reopen_err::<256>(written_region()),
        OpenError::AlignmentMismatch {
            stored: 64,
            expected: 256
        }
    );

    let mut short = HeapRegion::new(SUPERBLOCK_SPACE + 3 * CHUNK);
    let len = short.len();
    short
        .as_mut_slice()
        .copy_from_slice(&written_region().as_slice()[..len]);
    assert_eq!(
        reopen_err::<64>(short),
        OpenError::GeometryExceedsRegion {
            chunk_size: CHUNK,
            chunk_count: 4,
            len
        }
    );

    assert_eq!(
        RingBuf::<_, _, 64>::open(written_region(), Eadr, 0).err(),
        Some(OpenError::BadCommitterCount { count: 0 })
    );
}

fn reopen_err<const ALIGN: usize>(region: HeapRegion) -> OpenError {
    RingBuf::<_, _, ALIGN>::open(region, Eadr, 1)
        .err()
        .expect("open fails")
}

#[test]
fn format_rejects_bad_geometry() {
    let format = |len, chunk_size| {
        RingBuf::<_, _, 256>::format(HeapRegion::new(len), Eadr, chunk_size, 1).err()
    };
    assert_eq!(
        format(1 << 20, 1000),
        Some(OpenError::BadChunkSize {
            chunk_size: 1000,
            align: 256
        })
    );
    assert_eq!(
        format(1 << 20, 0),
        Some(OpenError::BadChunkSize {
            chunk_size: 0,
            align: 256
        })
    );
    assert_eq!(
        format(SUPERBLOCK_SPACE + 1000, 1024),
        Some(OpenError::RegionTooSmall {
            len: SUPERBLOCK_SPACE + 1000,
            chunk_size: 1024
        })
    );
    assert_eq!(
        format(0, 1024),
        Some(OpenError::RegionTooSmall {
            len: 0,
            chunk_size: 1024
        })
    );
}

/// The second half of a page-aligned buffer: aligned to 2048 bytes, not to 4096.
struct Offset(HeapRegion);

// SAFETY: a sub-range of a valid region.
unsafe impl Region for Offset {
    fn base(&self) -> *mut u8 {
        // SAFETY: within the allocation, which is longer than 2048 bytes.
        unsafe { self.0.base().add(2048) }
    }
    fn len(&self) -> usize {
        self.0.len() - 2048
    }
}

#[test]
fn a_region_must_start_at_the_alignment() {
    let region = Offset(HeapRegion::new(1 << 20));
    let addr = region.base() as usize;
    assert_eq!(
        RingBuf::<_, _, 4096>::format(region, Eadr, 4096, 1).err(),
        Some(OpenError::MisalignedRegion { addr, align: 4096 })
    );
    // The same memory is fine for a smaller alignment.
    assert!(RingBuf::<_, _, 2048>::format(Offset(HeapRegion::new(1 << 20)), Eadr, 4096, 1).is_ok());
}
