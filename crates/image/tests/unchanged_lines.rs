//! A dirty line whose pending stores only rewrite the bytes already durable (ext4 zeroing
//! a block that is zero) gives the same image whichever of its stores persist: it follows
//! the cut instead of multiplying the candidates, so the failure point's other lines are
//! explored in full rather than sampled.

mod common;

use common::Points;
use persim_image::{generate_images, GenerateOptions};
use persim_model::Strategy;

/// The fence's point after 16 lines of NT stores of `fill` over a zeroed PM and one NT
/// store of 1 to line 0: (its distinct images, whether it was sampled, its uncapped count).
fn fence_point(fill: &str) -> (usize, bool, Option<u128>) {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.trace");
    let mut text = String::from("# persim-trace pm-size=0x10000\n");
    for line in 1..=16u64 {
        text += &format!(
            "ntwrite {:#x} {fill} @ pc=0xffffffff813d8640\n",
            line * 0x40
        );
    }
    text += "ntwrite 0x0 01 @ pc=0xffffffff813d8644\nfence sfence @ pc=0xffffffff813d8650\n";
    std::fs::write(&trace, text).unwrap();
    let options = GenerateOptions {
        strategy: Strategy::GlobalPrefix,
        max_images: 64,
        ..GenerateOptions::default()
    };
    let mut points = Points::default();
    generate_images(&options, &trace, |_| Ok(()), &mut points, &mut |_| {}).unwrap();
    let fence = points
        .0
        .iter()
        .find(|p| p.index == 17)
        .expect("the fence's point");
    let mut images = fence.images.clone();
    images.sort();
    images.dedup();
    (images.len(), fence.incomplete, fence.space)
}

#[test]
fn lines_that_rewrite_durable_bytes_do_not_multiply_the_images() {
    // Zeros over zeros: only line 0 changes anything (stored or not); the count is of
    // choices (line 0 lost or kept at the first cut, everything at the last).
    assert_eq!(fence_point("0000000000000000"), (2, false, Some(3)));
    // The twin: the same stores of ones are explored, and 17 lines need more than 64: the
    // sample says it stands for every subset of them.
    let (images, sampled, space) = fence_point("ffffffffffffffff");
    assert!(sampled && images > 2, "{images} images, sampled {sampled}");
    assert_eq!(space, Some(1 << 17));
}
