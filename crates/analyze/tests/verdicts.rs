//! Verdicts on hand-made image indexes: what each interval's states and flags must be.

use persim_analyze::{verdicts, ImageOrigins};
use persim_model::{Choice, FailureKind, FailurePoint, Origin};
use persim_vm::Recovered;
use std::collections::HashMap;

fn origin(index: u64, kind: FailureKind, checkpoint: u64, choice: Choice) -> Origin {
    Origin {
        point: FailurePoint {
            index,
            kind,
            checkpoint: Some(checkpoint),
        },
        choice,
        block: None,
    }
}

const CP: FailureKind = FailureKind::Checkpoint;
const FENCE: FailureKind = FailureKind::Fence;

fn partial(number: u64) -> Choice {
    Choice::Enumerated { number, of: 9 }
}

/// Runs the verdicts on (hash, origins) with the states given per hash.
fn run(
    images: &[(&str, Vec<Origin>)],
    states: &[(&str, Recovered)],
) -> Vec<persim_analyze::CheckpointVerdict> {
    let states: HashMap<&str, Recovered> = states.iter().cloned().collect();
    verdicts(
        images
            .iter()
            .map(|(hash, origins)| ImageOrigins { hash, origins }),
        |h| states.get(h),
    )
}

#[test]
fn old_then_new_is_atomic() {
    let images = [
        (
            "old",
            vec![
                origin(1, CP, 1, Choice::Nothing),
                origin(5, FENCE, 1, Choice::Nothing),
            ],
        ),
        (
            "new",
            vec![
                origin(5, FENCE, 1, Choice::Everything),
                origin(9, CP, 2, Choice::Nothing),
            ],
        ),
        ("torn-but-same", vec![origin(5, FENCE, 1, partial(3))]),
    ];
    let states = [
        ("old", Recovered::state("{}")),
        ("new", Recovered::state(r#"{"/mnt/f": 1}"#)),
        ("torn-but-same", Recovered::state("{ }")),
    ];
    let v = run(&images, &states);
    assert_eq!(v.len(), 1, "only interval 1 -> 2 has both ends");
    let c = &v[0];
    assert_eq!((c.from, c.to), (1, 2));
    let names: Vec<&str> = c.states.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["c1s0", "c1s1"]);
    assert_eq!(c.states[0].images, ["old", "torn-but-same"]);
    assert_eq!(c.states[0].failure_points, [1, 5]);
    assert!(!c.states[0].partial_only && !c.states[1].partial_only);
    assert_eq!(c.final_states, ["c1s1"]);
    assert!(c.single_final_state && c.atomic && c.errors.is_empty());
}

#[test]
fn a_third_state_from_a_torn_image_breaks_atomicity_only() {
    let images = [
        ("old", vec![origin(1, CP, 1, Choice::Nothing)]),
        ("half", vec![origin(5, FENCE, 1, partial(1))]),
        ("new", vec![origin(9, CP, 2, Choice::Nothing)]),
    ];
    let states = [
        ("old", Recovered::state("{}")),
        ("half", Recovered::state(r#"{"/mnt/f": 0}"#)),
        ("new", Recovered::state(r#"{"/mnt/f": 1}"#)),
    ];
    let c = &run(&images, &states)[0];
    assert_eq!(c.states.len(), 3);
    assert_eq!(c.states[1].name, "c1s1");
    assert!(
        c.states[1].partial_only,
        "only a partial image leads to the half state"
    );
    assert!(c.single_final_state);
    assert!(!c.atomic);
}

#[test]
fn several_final_states_and_failed_recoveries_are_reported() {
    let images = [
        ("old", vec![origin(1, CP, 1, Choice::Nothing)]),
        ("new-a", vec![origin(9, CP, 2, Choice::Nothing)]),
        ("new-b", vec![origin(9, CP, 2, Choice::Everything)]),
        ("broken", vec![origin(5, FENCE, 1, partial(2))]),
        ("unextracted", vec![origin(5, FENCE, 1, partial(4))]),
    ];
    let states = [
        ("old", Recovered::state("{}")),
        ("new-a", Recovered::state(r#"{"/mnt/f": 1}"#)),
        ("new-b", Recovered::state(r#"{"/mnt/f": 2}"#)),
        (
            "broken",
            Recovered::RecoveryError {
                output: "mount: wrong fs type\nmore".into(),
            },
        ),
    ];
    let c = &run(&images, &states)[0];
    assert!(!c.single_final_state && !c.atomic);
    assert_eq!(c.final_states.len(), 2);
    let errors: Vec<(&str, &str)> = c
        .errors
        .iter()
        .map(|e| (e.outcome.name(), e.output.as_str()))
        .collect();
    assert_eq!(
        errors,
        [
            ("recovery-error", "mount: wrong fs type\nmore"),
            ("not-extracted", "no state was extracted for this image")
        ]
    );
}
