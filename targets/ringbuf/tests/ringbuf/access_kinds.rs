//! Every PM access this CPU supports writes the same bytes.

use persim_ringbuf::{
    dispatch, AccessKind, AccessVisitor, HeapRegion, PmAccess, RingBuf, LINE, SUPERBLOCK_SPACE,
};

use crate::body;

/// Runs a fixed workload (appends of many sizes, a release, a reuse) and returns the
/// region's bytes.
pub(crate) struct Workload;

impl AccessVisitor for Workload {
    type Output = Vec<u8>;
    fn visit<A: PmAccess + 'static>(self, access: A) -> Vec<u8> {
        let region = HeapRegion::new(SUPERBLOCK_SPACE + 16 * 4096);
        let log = RingBuf::<_, _, 64>::format(region, access, 4096, 1).unwrap();
        for n in 0..40 {
            log.append(&body(n, (n as usize * 97) % 1500)).unwrap();
        }
        log.release(10);
        log.append(&body(99, 1000)).unwrap();
        log.into_parts().0.as_slice().to_vec()
    }
}

/// Stores `len` bytes at line 1 of a region filled with 0xee and returns the region.
struct StoreOnce(usize);

impl AccessVisitor for StoreOnce {
    type Output = HeapRegion;
    fn visit<A: PmAccess + 'static>(self, access: A) -> HeapRegion {
        let mut region = HeapRegion::new(8 * LINE);
        region.as_mut_slice().fill(0xee);
        // SAFETY: line 1 plus at most 4 lines lie inside the 8-line region.
        unsafe { access.store(region.as_mut_slice().as_mut_ptr(), LINE, &body(3, self.0)) };
        access.fence();
        region
    }
}

fn supported() -> Vec<AccessKind> {
    AccessKind::ALL
        .into_iter()
        .filter(|kind| kind.is_supported())
        .collect()
}

#[test]
fn all_supported_kinds_leave_identical_regions() {
    let kinds = supported();
    assert!(kinds.contains(&AccessKind::Eadr));
    #[cfg(target_arch = "x86_64")]
    assert!(
        kinds.contains(&AccessKind::NtSse2),
        "SSE2 is part of x86-64"
    );
    let reference = dispatch(AccessKind::Eadr, Workload).unwrap();
    for kind in kinds {
        assert!(
            dispatch(kind, Workload).unwrap() == reference,
            "{} differs",
            kind.name()
        );
    }
}

#[test]
fn a_store_writes_its_bytes_then_zeros_to_the_line_end_and_nothing_else() {
    for kind in supported() {
        for len in [0, 1, 15, 16, 33, 63, 64, 65, 200, 256] {
            let region = dispatch(kind, StoreOnce(len)).unwrap();
            let bytes = region.as_slice();
            let end = LINE + len.div_ceil(LINE) * LINE;
            let what = format!("{} storing {len} bytes", kind.name());
            assert!(
                bytes[..LINE].iter().all(|&b| b == 0xee),
                "{what}: line 0 untouched"
            );
            assert_eq!(bytes[LINE..LINE + len], body(3, len), "{what}: data");
            assert!(
                bytes[LINE + len..end].iter().all(|&b| b == 0),
                "{what}: zero padding"
            );
            assert!(
                bytes[end..].iter().all(|&b| b == 0xee),
                "{what}: later lines untouched"
            );
        }
    }
}
