//! Verdicts on hand-made image indexes: what each interval's states and flags must be.

use persim_analyze::{verdicts, ImageOrigins, Invariant, Media};
use persim_model::{replay_in_memory, Choice, Config, FailureKind, FailurePoint, Origin};
use persim_state::Recovered;
use persim_trace::{Entry, Reader};
use std::collections::{BTreeMap, HashMap};

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

/// Runs the verdicts on (hash, origins) with the states given per hash and the invariants.
fn run(
    images: &[(&str, Vec<Origin>)],
    states: &[(&str, Recovered)],
    invariants: &[&str],
) -> Vec<persim_analyze::CheckpointVerdict> {
    let invariants: Vec<Invariant> = invariants
        .iter()
        .map(|text| Invariant::parse(text).unwrap())
        .collect();
    let states: HashMap<&str, Recovered> = states.iter().cloned().collect();
    verdicts(
        images
            .iter()
            .map(|(hash, origins)| ImageOrigins { hash, origins }),
        |h| states.get(h),
        &invariants,
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
    let v = run(&images, &states, &[]);
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
    let c = &run(&images, &states, &[])[0];
    assert_eq!(c.states.len(), 3);
    assert_eq!(c.states[1].name, "c1s1");
    assert!(
        c.states[1].partial_only,
        "only a partial image leads to the half state"
    );
    assert!(c.single_final_state);
    assert!(!c.atomic);
}

/// A counter persisted after each insert: (count 0, one item) lies between the ends and
/// is allowed by the invariant; a counter durable before its item is not.
#[test]
fn an_invariant_allows_intermediate_states_and_names_those_that_break_it() {
    let mut images = vec![
        ("old", vec![origin(1, CP, 1, Choice::Nothing)]),
        ("item-only", vec![origin(5, FENCE, 1, partial(1))]),
        ("new", vec![origin(9, CP, 2, Choice::Nothing)]),
    ];
    let mut states = vec![
        ("old", Recovered::state(r#"{"count": 0, "items": []}"#)),
        (
            "item-only",
            Recovered::state(r#"{"count": 0, "items": ["a"]}"#),
        ),
        ("new", Recovered::state(r#"{"count": 1, "items": ["a"]}"#)),
    ];
    let invariant = ["/count <= len(/items)"];
    let without = &run(&images, &states, &[])[0];
    assert!(without.invariant.is_none() && without.violated());
    let c = &run(&images, &states, &invariant)[0];
    assert_eq!(c.states.len(), 3);
    assert!(!c.atomic, "atomicity is judged as before");
    let verdict = c.invariant.as_ref().unwrap();
    assert!(verdict.holds && verdict.broken.is_empty(), "{verdict:?}");
    assert!(!c.violated());

    images.push(("count-only", vec![origin(5, FENCE, 1, partial(2))]));
    states.push((
        "count-only",
        Recovered::state(r#"{"count": 1, "items": []}"#),
    ));
    // Neither a state that is not JSON nor a failed recovery is checked: the error is
    // reported as an error.
    images.push(("text", vec![origin(5, FENCE, 1, partial(3))]));
    states.push(("text", Recovered::state("not json")));
    let c = &run(&images, &states, &invariant)[0];
    let verdict = c.invariant.as_ref().unwrap();
    assert!(!verdict.holds && c.violated());
    assert_eq!(verdict.broken.len(), 1, "{verdict:?}");
    let broken = &verdict.broken[0];
    let count_only = c
        .states
        .iter()
        .find(|s| s.images == ["count-only"])
        .unwrap();
    assert_eq!(
        (
            broken.state.as_str(),
            broken.invariant.as_str(),
            broken.why.as_str()
        ),
        (
            count_only.name.as_str(),
            "/count <= len(/items)",
            "/count is 1, len(/items) is 0"
        )
    );

    images.push(("broken", vec![origin(5, FENCE, 1, partial(4))]));
    states.push((
        "broken",
        Recovered::RecoveryError {
            output: "bad".into(),
        },
    ));
    let c = &run(&images[..3], &states, &invariant)[0];
    assert!(!c.violated());
    let mut with_error = images[..3].to_vec();
    with_error.push(images[5].clone());
    let c = &run(&with_error, &states, &invariant)[0];
    assert!(c.invariant.as_ref().unwrap().holds);
    assert!(c.violated(), "a failed recovery stays a violation");
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
    let c = &run(&images, &states, &[])[0];
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

/// An origin at failure point `index` of interval 1 with the PM and disk choices given.
fn mixed(index: u64, kind: FailureKind, pm: Choice, disk: Option<Choice>) -> Origin {
    Origin {
        block: disk,
        ..origin(index, kind, 1, pm)
    }
}

/// The states of interval 1 -> 2 by name and the media each names.
fn media(images: &[(&str, Vec<Origin>)], states: &[(&str, &str)]) -> Vec<(String, Vec<Media>)> {
    let states: Vec<(&str, Recovered)> = states
        .iter()
        .map(|&(hash, state)| (hash, Recovered::state(state)))
        .collect();
    run(images, &states, &[])[0]
        .states
        .iter()
        .map(|s| (s.name.clone(), s.media.clone()))
        .collect()
}

#[test]
fn each_extra_state_names_the_media_whose_pending_writes_its_images_leave_out() {
    use Choice::{Everything as All, Nothing as No};
    const BLKFLUSH: FailureKind = FailureKind::Blkflush;
    let (no, all) = (|| Some(No), || Some(All));
    // The fence at 5 has pending PM stores and disk writes; at the disk flush at 7 only the
    // disk has any (PM's one choice there is "nothing").
    let images = [
        ("cp1", vec![origin(1, CP, 1, No)]),
        ("5-no-no", vec![mixed(5, FENCE, No, no())]),
        ("5-no-all", vec![mixed(5, FENCE, No, all())]),
        ("5-torn-no", vec![mixed(5, FENCE, partial(1), no())]),
        ("5-torn-all", vec![mixed(5, FENCE, partial(1), all())]),
        ("5-torn2-all", vec![mixed(5, FENCE, partial(2), all())]),
        ("5-all-no", vec![mixed(5, FENCE, All, no())]),
        ("5-all-all", vec![mixed(5, FENCE, All, all())]),
        ("5-torn3-all", vec![mixed(5, FENCE, partial(3), all())]),
        ("7-no-no", vec![mixed(7, BLKFLUSH, No, no())]),
        ("7-no-all", vec![mixed(7, BLKFLUSH, No, all())]),
        ("cp2", vec![origin(9, CP, 2, No)]),
    ];
    let states = [
        ("cp1", "old"),
        ("5-no-no", "both lost"),
        ("5-no-all", "pm lost"),
        ("5-torn-no", "torn"),
        ("5-torn-all", "torn"),
        ("5-torn2-all", "either"),
        ("5-all-no", "either"),
        ("5-all-all", "new"),
        // A torn image that equals the new state: the state needs nothing lost.
        ("5-torn3-all", "new"),
        ("7-no-no", "data lost"),
        ("7-no-all", "new"),
        ("cp2", "new"),
    ];
    use Media::{Disk, Pm, PmAndDisk};
    let want = |name: &str, media: &[Media]| (name.to_owned(), media.to_vec());
    assert_eq!(
        media(&images, &states),
        [
            want("c1s0", &[]),
            want("c1s1", &[Pm]),
            want("c1s2", &[PmAndDisk]),
            // "torn" also arises with the disk's writes lost: PM alone suffices.
            want("c1s3", &[Pm]),
            want("c1s4", &[Pm, Disk]),
            want("c1s5", &[]),
            // PM had nothing pending at the disk flush: only the disk's writes are lost.
            want("c1s6", &[Disk]),
        ]
    );
    // Without a disk no state names a medium.
    let pm_only: Vec<(&str, Vec<Origin>)> = images
        .iter()
        .map(|(hash, origins)| {
            let origins = origins
                .iter()
                .map(|o| Origin {
                    block: None,
                    ..o.clone()
                })
                .collect();
            (*hash, origins)
        })
        .collect();
    assert!(media(&pm_only, &states).iter().all(|(_, m)| m.is_empty()));
}

/// ext4 with its journal on PM, in small: the file's data is written to the disk's
/// volatile cache, the commit record to PM is flushed and fenced, and only then is the
/// disk flushed (docs/results/results.md, "Cross-media").
const COMMIT_BEFORE_DISK_FLUSH: &str = "\
# persim-trace pm-size=0x1000 blk-size=0x1000
hypercall checkpoint 1
blkwrite 0x200 {DATA}
write 0x40 01
flush clwb 0x40
fence sfence
blkflush
hypercall checkpoint 2
";

#[test]
fn a_commit_on_pm_before_the_disk_flush_gives_a_state_from_the_disk() {
    let text = COMMIT_BEFORE_DISK_FLUSH.replace("{DATA}", &"dd".repeat(512));
    let reader = Reader::new(std::io::Cursor::new(text)).unwrap();
    let config = Config::of_header(&reader.header());
    let entries: Vec<Entry> = reader.map(Result::unwrap).collect();
    let initial = vec![0u8; config.image_len() as usize];
    // Each image by the bytes the trace writes; its origins as the image store keeps them.
    let mut origins: BTreeMap<String, Vec<Origin>> = BTreeMap::new();
    for point in replay_in_memory(config, initial, &entries).unwrap() {
        for (image, choice, block) in point.images {
            let (commit, data) = (image[0x40], image[0x1200]);
            origins
                .entry(format!("{commit}-{data}"))
                .or_default()
                .push(Origin {
                    point: point.point,
                    choice,
                    block,
                });
        }
    }
    // Recovery finds the file once the commit is durable, with whatever its block holds.
    let states: Vec<(String, Recovered)> = origins
        .keys()
        .map(|hash| {
            let (commit, data) = hash.split_once('-').unwrap();
            let dump = match commit {
                "0" => "{}".to_owned(),
                _ => format!(r#"{{"/mnt/f": {data}}}"#),
            };
            (hash.clone(), Recovered::state(&dump))
        })
        .collect();
    let states: HashMap<&str, &Recovered> = states.iter().map(|(h, r)| (h.as_str(), r)).collect();
    let v = verdicts(
        origins
            .iter()
            .map(|(hash, origins)| ImageOrigins { hash, origins }),
        |h| states.get(h).copied(),
        &[],
    );
    let found: Vec<(&str, &[Media])> = v[0]
        .states
        .iter()
        .map(|s| (s.name.as_str(), s.media.as_slice()))
        .collect();
    assert_eq!(
        found,
        [
            ("c1s0", &[][..]),
            ("c1s1", &[Media::Disk][..]),
            ("c1s2", &[][..])
        ]
    );
    assert_eq!(states["1-0"], &Recovered::state(r#"{"/mnt/f": 0}"#));
    assert_eq!(v[0].states[1].images, ["1-0"]);
    assert!(!v[0].atomic && v[0].single_final_state);
}

/// PMFS and WineFS recovery finishes an interrupted operation and stamps it with its own
/// clock: a state that is another but for those times is that state, not a third one.
#[test]
fn times_set_by_recovery_make_no_state_of_their_own() {
    let epoch = persim_abi::RECOVERY_EPOCH;
    let file = |mtime: i64, size: u32| {
        Recovered::state(&format!(
            r#"{{"/mnt/f": {{"mtime": "{mtime}.0", "size": "{size}"}}}}"#
        ))
    };
    let images = [
        ("old", vec![origin(1, CP, 1, Choice::Nothing)]),
        ("finished", vec![origin(5, FENCE, 1, partial(1))]),
        ("new", vec![origin(9, CP, 2, Choice::Nothing)]),
    ];
    let states = [
        ("old", file(1000, 0)),
        ("finished", file(epoch + 2, 4)),
        ("new", file(2000, 4)),
    ];
    let c = &run(&images, &states, &[])[0];
    assert_eq!(c.states.len(), 2, "{:#?}", c.states);
    assert!(c.atomic);
    assert_eq!(c.states[1].images, ["finished", "new"]);
    assert!(c.states[1].times_set_by_recovery && !c.states[0].times_set_by_recovery);
    // A state that differs in more than the times stays a state of its own.
    let torn = [
        ("old", file(1000, 0)),
        ("finished", file(epoch + 2, 2)),
        ("new", file(2000, 4)),
    ];
    let c = &run(&images, &torn, &[])[0];
    assert_eq!(c.states.len(), 3);
    assert!(!c.atomic);
}
