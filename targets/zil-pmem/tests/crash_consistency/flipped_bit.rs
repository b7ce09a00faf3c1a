//! A bit flipped in a body on PM (a media error or a stray write): replay must not hand
//! the damaged body to the consumer.

use persim_crash_check::body;
use persim_ringbuf::{Eadr, HeapRegion};
#[cfg(not(feature = "mutant-no-body-checksum"))]
use persim_zil_pmem::Position;
use persim_zil_pmem::{ReplayError, ReplayStop, ZilPmem, HEADER_SIZE, SUPERBLOCK_SPACE};

use crate::run::header;

/// Writes three dependent entries, flips one bit in the second's body, reopens and
/// replays. Returns the bodies replay applied and where it stopped.
pub fn replay_with_a_flipped_bit() -> (Vec<Vec<u8>>, Option<ReplayStop>) {
    let region = HeapRegion::new(SUPERBLOCK_SPACE + 2 * 4096);
    let mut log = ZilPmem::format(region, Eadr, 4096, 1).unwrap();
    let claim = log.claim(&header(), 1).unwrap();
    log.replay(&claim, |_, _| Ok::<(), ()>(())).unwrap();
    for i in 0..3 {
        log.append(1, 1, &body(i, 500), true).unwrap();
    }
    let mut region = log.into_region();
    // The second entry starts after the first (256 + 512 bytes).
    let second_body = SUPERBLOCK_SPACE + HEADER_SIZE + 512 + HEADER_SIZE;
    region.as_mut_slice()[second_body + 10] ^= 0x10;
    let mut log = ZilPmem::open(region, Eadr, 1).unwrap();
    let claim = log.claim(&header(), 1).unwrap();
    let mut applied = Vec::new();
    let result = log.replay(&claim, |entry, _| {
        applied.push(entry.body.to_vec());
        Ok::<(), ()>(())
    });
    let stop = match result {
        Ok(_) => None,
        Err(ReplayError::Stopped(stop)) => Some(stop),
        Err(ReplayError::Consumer { .. }) => unreachable!("the consumer never fails"),
    };
    (applied, stop)
}

#[cfg(not(feature = "mutant-no-body-checksum"))]
#[test]
fn a_flipped_bit_in_a_body_stops_replay_before_that_entry() {
    let (applied, stop) = replay_with_a_flipped_bit();
    assert_eq!(applied, [body(0, 500)]);
    let stop = stop.expect("replay must stop at the damaged body");
    assert_eq!(
        stop,
        ReplayStop::BodyChecksum {
            entry: Position { gen: 2, id: 1 },
            chunk: 0,
            offset: 768
        }
    );
}
