//! A log in a mapped file survives unmapping and mapping again.

use persim_ringbuf::{Eadr, MappedRegion, RingBuf, SUPERBLOCK_SPACE};

use crate::{body, recovered};

#[test]
fn a_log_in_a_file_is_recovered_after_remapping() {
    let file = tempfile::tempfile().unwrap();
    file.set_len((SUPERBLOCK_SPACE + 8 * 4096) as u64).unwrap();
    // SAFETY: the temporary file is private to this test and not resized while mapped.
    let region = unsafe { MappedRegion::map(&file) }.unwrap();
    let log = RingBuf::<_, _, 256>::format(region, Eadr, 4096, 2).unwrap();
    let ids: Vec<u64> = (0..20)
        .map(|n| log.append(&body(n, 300)).unwrap())
        .collect();
    drop(log);

    // SAFETY: as above.
    let region = unsafe { MappedRegion::map_len(&file, SUPERBLOCK_SPACE + 8 * 4096) }.unwrap();
    let mut log = RingBuf::<_, _, 256>::open(region, Eadr, 2).unwrap();
    let expected: Vec<(u64, Vec<u8>)> = ids
        .iter()
        .zip(0..)
        .map(|(&id, n)| (id, body(n, 300)))
        .collect();
    assert_eq!(recovered(&mut log), expected);
}
