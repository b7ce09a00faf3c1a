//! Media faults in a written log, made as `persim faults` makes them (persim-image's
//! `Fault`): every bit of every entry flipped in turn, the log opened and recovered again,
//! and each fault judged as `persim faults` judges it: masked (the same entries), detected
//! (recovery reports a damaged entry), or silent (other entries without a word).

use persim_image::{Fault, FaultKind};
use persim_ringbuf::{Eadr, HeapRegion, RingBuf, HEADER_SPACE, SUPERBLOCK_SPACE};

use crate::body;

const CHUNK: usize = 4096;
const ENTRIES: u64 = 3;
const BODY: usize = 100;
/// The encoded header's bytes at the start of its line (the rest is padding).
const HEADER_BYTES: usize = 24;
/// Where entry `n` (from 1) starts: entries of 64-byte alignment, 192 bytes each.
const fn entry_start(n: u64) -> usize {
    SUPERBLOCK_SPACE + (n as usize - 1) * 192
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Masked,
    Detected,
    Silent,
}

/// A log of 2 chunks with three 100-byte entries in chunk 0.
fn written() -> HeapRegion {
    written_with(ENTRIES)
}

/// A log of 2 chunks with `entries` 100-byte entries in chunk 0.
fn written_with(entries: u64) -> HeapRegion {
    let log = RingBuf::<_, _, 64>::format(
        HeapRegion::new(SUPERBLOCK_SPACE + 2 * CHUNK),
        Eadr,
        CHUNK,
        1,
    )
    .unwrap();
    for seed in 1..=entries {
        log.append(&body(seed, BODY)).unwrap();
    }
    log.into_parts().0
}

/// What recovering a region gives: each entry (id, body), or the error recovery reports.
type Recovered = Result<Vec<(u64, Vec<u8>)>, String>;

fn recover(region: HeapRegion) -> Recovered {
    let mut log = RingBuf::<_, _, 64>::open(region, Eadr, 1).map_err(|e| e.to_string())?;
    log.recover()
        .map(|entry| {
            entry
                .map(|e| (e.id, e.body.to_vec()))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// The outcome of flipping bit `bit` of byte `offset`, and what recovery gave.
fn flip(offset: usize, bit: u64) -> (Outcome, Recovered) {
    flip_in(written, offset, bit)
}

/// The same in the log `written` makes.
fn flip_in(written: impl Fn() -> HeapRegion, offset: usize, bit: u64) -> (Outcome, Recovered) {
    let fault = Fault {
        kind: FaultKind::BitFlip,
        offset: offset as u64,
        draw: bit,
    };
    let mut region = written();
    let bytes = region.as_mut_slice();
    let range = fault.range(bytes.len() as u64);
    fault.corrupt(&mut bytes[range.start as usize..range.end as usize]);
    let expected = recover(written()).unwrap();
    let recovered = recover(region);
    let outcome = match &recovered {
        Err(_) => Outcome::Detected,
        Ok(entries) if *entries == expected => Outcome::Masked,
        Ok(_) => Outcome::Silent,
    };
    (outcome, recovered)
}

/// Every bit of every entry's body: all detected, none silent (the mutant
/// `mutant-no-body-check` makes them silent, and this test fails on it).
#[test]
fn every_flipped_bit_of_a_body_is_detected() {
    for entry in 1..=ENTRIES {
        let body = entry_start(entry) + HEADER_SPACE;
        for offset in body..body + BODY {
            for bit in 0..8 {
                let (outcome, _) = flip(offset, bit);
                assert_eq!(
                    outcome,
                    Outcome::Detected,
                    "entry {entry}: bit {bit} of body byte {} flipped",
                    offset - body
                );
            }
        }
    }
}

/// Every bit of every entry's header line: each of the 576 bits of the headers' 24 bytes is
/// detected (no crash leaves a header whose every word is written but whose checksum fails,
/// nor a torn header with a written entry after it, nor a release cut short with the
/// checksum word written), never taken for a torn tail; a flip in the line's padding is
/// masked, and so is one that zeroes an id of one set bit (the id is restored: the header
/// is valid with it). Before the first fix, these flips ended the chunk without a word (silent); before
/// the release zeroed the checksum word first, the flip that zeroes the id word of a chunk's
/// first entry (id 1, bit 0) was taken for a release cut short (docs/design/ringbuf.md).
#[test]
fn every_flipped_bit_of_a_header_is_detected() {
    for entry in 1..=ENTRIES {
        let header = entry_start(entry);
        for offset in header..header + HEADER_SPACE {
            for bit in 0..8 {
                let (outcome, recovered) = flip(offset, bit);
                // Entry n has id n: zeroing the one set bit of id 1 or 2 leaves a header
                // that is valid with that id again.
                let zeroes_the_id = offset == header
                    && entry.is_power_of_two()
                    && bit == u64::from(entry.trailing_zeros());
                let expected = if offset - header < HEADER_BYTES && !zeroes_the_id {
                    Outcome::Detected
                } else {
                    Outcome::Masked
                };
                assert_eq!(
                    outcome,
                    expected,
                    "entry {entry}: bit {bit} of header byte {} gave {recovered:?}",
                    offset - header
                );
            }
        }
    }
}

/// The id of a chunk's *last* entry zeroed by a flipped bit (id 4, one bit set, no entry
/// after it) left what a torn append leaves: recovery ended the chunk before it and the
/// acknowledged entry was lost without an error (silent). The id is restored from the
/// header's checksum: every bit of an id word of one set bit, zeroed, is masked.
#[test]
fn a_zeroed_id_of_one_bit_is_restored_even_in_a_chunks_last_entry() {
    for last in [1, 2, 4] {
        let header = entry_start(last);
        let (outcome, recovered) = flip_in(
            || written_with(last),
            header,
            u64::from(last.trailing_zeros()),
        );
        assert_eq!(
            outcome,
            Outcome::Masked,
            "the id of entry {last} of {last} zeroed: {recovered:?}"
        );
    }
}

fn region_of(bytes: &[u8]) -> HeapRegion {
    let mut region = HeapRegion::new(bytes.len());
    region.as_mut_slice().copy_from_slice(bytes);
    region
}

/// A crash during a release (its first step: the first header's checksum word zeroed),
/// then, after the restart, a crash during the first append into that chunk, while its
/// header is written over the torn one: every mixture of the old and the new header words
/// gives the chunk without the in-flight entry or with it, never a damaged header. `open`
/// zeroes a free chunk's torn first header durably first; before it did, the mixture of the
/// old id and length words with the new checksum word was reported as damage.
#[test]
fn a_crash_in_a_release_then_in_the_first_append_there_is_never_damage() {
    let mut region = written();
    // The release's first step persisted, the second not.
    let start = SUPERBLOCK_SPACE;
    region.as_mut_slice()[start + 16..start + 24].fill(0);
    let log = RingBuf::<_, _, 64>::open(region, Eadr, 1).unwrap();
    let before = log.into_parts().0.as_slice().to_vec();
    let log = RingBuf::<_, _, 64>::open(region_of(&before), Eadr, 1).unwrap();
    let appended = body(9, 2 * BODY);
    let id = log.append(&appended).unwrap();
    let after = log.into_parts().0.as_slice().to_vec();
    // The append went to chunk 0, whose first header it wrote.
    assert_ne!(before[start..start + 24], after[start..start + 24]);
    for mix in 0..8u32 {
        let mut crashed = after.clone();
        for word in 0..3 {
            if mix & (1 << word) == 0 {
                let at = start + word * 8;
                crashed[at..at + 8].copy_from_slice(&before[at..at + 8]);
            }
        }
        let recovered = recover(region_of(&crashed));
        let whole = Ok(vec![(id, appended.clone())]);
        assert!(
            recovered == Ok(Vec::new()) || recovered == whole,
            "header words {mix:03b} new: {recovered:?}"
        );
    }
}
