//! Where a libpmemobj pool keeps its lanes, read from its on-media format: a pool header
//! ("PMEMOBJ" at a 4 KiB boundary of PM: the pool file's first page), its pool
//! descriptor's `lanes_offset`, `nlanes` and `heap_offset`, and the heap's header at that
//! offset. The heap's signature where the descriptor puts it shows that the file's pages
//! from the header to the heap lie in PM in order (as a fresh file system allocates a
//! pool file), so that a pool offset is a PM offset from the header; anything else gives
//! `None` and no log is followed (docs/design/model.md, "libpmemobj logs").

use crate::layout_bytes::read;
use crate::Image;
use persim_model::PmemobjLayout;

const PAGE: u64 = 4096;
const POOL_SIGNATURE: &[u8; 8] = b"PMEMOBJ\0";
const HEAP_SIGNATURE: &[u8; 16] = b"MEMORY_HEAP_HDR\0";
/// The pool descriptor's fields after the 4 KiB pool header and the 1 KiB layout name.
const LANES_OFFSET: u64 = 0x1400;
const LANE: u64 = 3072;

/// The lanes of the first libpmemobj pool in `image`'s first `pm_size` bytes.
pub fn pmemobj_layout(image: &Image, pm_size: u64) -> Option<PmemobjLayout> {
    let end = pm_size.min(image.len());
    (0..end.saturating_sub(LANES_OFFSET + 24))
        .step_by(PAGE as usize)
        .filter(|&at| read(image, at, 8) == POOL_SIGNATURE)
        .find_map(|pool| pool_at(image, pool, end))
}

fn pool_at(image: &Image, pool: u64, end: u64) -> Option<PmemobjLayout> {
    let descriptor = read(image, pool + LANES_OFFSET, 24);
    let word = |i: usize| u64::from_le_bytes(descriptor[i * 8..i * 8 + 8].try_into().unwrap());
    let (lanes, nlanes, heap) = (word(0), word(1), word(2));
    let lanes_end = lanes.checked_add(nlanes.checked_mul(LANE)?)?;
    let sane = lanes >= LANES_OFFSET && nlanes > 0 && lanes_end <= heap;
    let heap_at = pool.checked_add(heap)?;
    let signed = heap_at.checked_add(16).is_some_and(|e| e <= end)
        && read(image, heap_at, 16) == HEAP_SIGNATURE;
    (sane && signed).then_some(PmemobjLayout {
        pool,
        lanes: pool + lanes,
        nlanes,
    })
}
