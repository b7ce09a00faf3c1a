//! Regions that are not this library's log are refused with an error that says why.

use persim_ringbuf::{Eadr, HeapRegion};
use persim_zil_pmem::{OpenError, ZilPmem, SUPERBLOCK_SPACE};

fn formatted(len: usize) -> HeapRegion {
    ZilPmem::format(HeapRegion::new(len), Eadr, 1024, 1)
        .unwrap()
        .into_region()
}

#[test]
fn another_version_is_refused() {
    let mut region = formatted(SUPERBLOCK_SPACE + 4096);
    let bytes = region.as_mut_slice();
    bytes[8] = 2;
    // Re-seal the superblock so only the version differs.
    let crc = crc32c::crc32c(&bytes[0..32]);
    bytes[32..36].copy_from_slice(&crc.to_le_bytes());
    let err = ZilPmem::open(region, Eadr, 1).err().unwrap();
    assert_eq!(
        err,
        OpenError::OtherVersion {
            version: 2,
            header_size: 256
        }
    );
    assert!(err.to_string().contains("format version 2"), "{err}");
}

#[test]
fn another_geometry_is_refused() {
    let region = formatted(SUPERBLOCK_SPACE + 4096);
    let mut smaller = HeapRegion::new(SUPERBLOCK_SPACE + 2048);
    smaller
        .as_mut_slice()
        .copy_from_slice(&region.as_slice()[..SUPERBLOCK_SPACE + 2048]);
    let err = ZilPmem::open(smaller, Eadr, 1).err().unwrap();
    assert!(
        matches!(err, OpenError::OtherGeometry { chunk_count: 4, .. }),
        "{err}"
    );
    let blank = ZilPmem::open(HeapRegion::new(8192), Eadr, 1).err().unwrap();
    assert_eq!(blank, OpenError::NotFormatted);
}
