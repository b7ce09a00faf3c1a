//! An interrupt that lands inside a copy drains its non-temporal stores on real hardware,
//! but where it lands is no choice of the program: the crash images are those of the same
//! execution without it, for every strategy (docs/design/model.md, "Interrupts").

use persim_model::{replay_in_memory, Config, Strategy};
use persim_trace::{Entry, FenceKind, Hypercall, Op};
use std::collections::BTreeSet;

/// A two-line copy with NT stores and the fence after it, an interrupt's `iret` after the
/// first line when `interrupted`.
fn copy(interrupted: bool) -> Vec<Entry> {
    let nt = |addr: u64, byte: u8| Op::Write {
        addr,
        data: vec![byte; 8],
        nt: true,
    };
    let mut ops = vec![
        Op::Hypercall(Hypercall::Start),
        Op::Hypercall(Hypercall::Checkpoint(1)),
        nt(0x0, 1),
    ];
    if interrupted {
        ops.push(Op::Fence(FenceKind::Interrupt));
    }
    ops.extend([
        nt(0x40, 2),
        Op::Fence(FenceKind::Sfence),
        Op::Hypercall(Hypercall::Checkpoint(2)),
        Op::Hypercall(Hypercall::Success),
    ]);
    ops.into_iter().map(Entry::from).collect()
}

/// Every distinct image of the replay, and the failure points it had.
fn images(strategy: Strategy, interrupted: bool) -> (BTreeSet<Vec<u8>>, usize) {
    let mut config = Config::new(0x1000);
    config.strategy = strategy;
    let points = replay_in_memory(config, vec![0; 0x1000], &copy(interrupted)).unwrap();
    let images = (points.iter())
        .flat_map(|p| p.images.iter().map(|(image, _, _)| image.clone()))
        .collect();
    (images, points.len())
}

#[test]
fn an_interrupt_changes_no_strategys_images() {
    for strategy in [
        Strategy::ProgramOrder,
        Strategy::Fast,
        Strategy::GlobalPrefix,
        Strategy::SingleLine,
        Strategy::Exhaustive,
    ] {
        assert_eq!(
            images(strategy, true),
            images(strategy, false),
            "{strategy:?}"
        );
    }
    // program-order: the copy is there whole or not at all.
    let (states, _) = images(Strategy::ProgramOrder, true);
    let torn = states.iter().any(|image| image[0] == 1 && image[0x40] == 0);
    assert!(!torn, "a state torn where the interrupt landed");
}
