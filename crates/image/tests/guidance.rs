//! The first pass of `reads` makes a fully persisted image only where a read set can
//! change the images: not at a failure point whose dirty lines all lie outside the PM the
//! program accessed (the kernel's, under the `program` scope).

mod common;

use common::Points;
use persim_image::{generate_images, GenerateOptions, Guidance};
use persim_model::{Scope, Strategy};

/// The failure points' indexes that got an image.
fn imaged(guidance: Guidance, scope: Scope) -> Vec<u64> {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.trace");
    // The program stores to its page, flushes and fences (failure point at entry 2); the
    // kernel stores to another page without a flush, which stays pending at its fence
    // (entry 4) and at the end (entry 5).
    std::fs::write(
        &trace,
        "# persim-trace pm-size=0x4000\n\
         write 0x40 01 @ pc=0x555555557d21\n\
         flush clwb 0x40 @ pc=0x555555557d25\n\
         fence sfence @ pc=0x555555557d29\n\
         write 0x2000 02 @ pc=0xffffffff813d864d\n\
         fence sfence @ pc=0xffffffff813d8650\n",
    )
    .unwrap();
    let options = GenerateOptions {
        strategy: Strategy::Reads,
        guidance,
        scope,
        ..GenerateOptions::default()
    };
    let mut points = Points::default();
    generate_images(&options, &trace, |_| Ok(()), &mut points, &mut |_| {}).unwrap();
    points
        .0
        .iter()
        .filter(|p| !p.images.is_empty())
        .map(|p| p.index)
        .collect()
}

#[test]
fn reads_traces_no_recovery_where_nothing_can_be_explored() {
    assert_eq!(
        imaged(Guidance::FullyPersistedToGuide, Scope::Program),
        [2],
        "only the program's fence has a line to explore"
    );
    assert_eq!(
        imaged(Guidance::FullyPersistedToGuide, Scope::All),
        [2, 4, 5]
    );
    // faults and references ask for every point's fully persisted image
    assert_eq!(imaged(Guidance::FullyPersisted, Scope::Program), [2, 4, 5]);
}
