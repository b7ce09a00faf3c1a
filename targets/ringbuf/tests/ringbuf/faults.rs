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
    let log = RingBuf::<_, _, 64>::format(
        HeapRegion::new(SUPERBLOCK_SPACE + 2 * CHUNK),
        Eadr,
        CHUNK,
        1,
    )
    .unwrap();
    for seed in 1..=ENTRIES {
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
/// masked. Before the first fix, these flips ended the chunk without a word (silent); before
/// the release zeroed the checksum word first, the flip that zeroes the id word of a chunk's
/// first entry (id 1, bit 0) was taken for a release cut short (docs/ringbuf.md).
#[test]
fn every_flipped_bit_of_a_header_is_detected() {
    for entry in 1..=ENTRIES {
        let header = entry_start(entry);
        for offset in header..header + HEADER_SPACE {
            for bit in 0..8 {
                let (outcome, recovered) = flip(offset, bit);
                let expected = if offset - header < HEADER_BYTES {
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
