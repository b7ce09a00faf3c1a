//! `run_faults` with a fake guest: the uncorrupted images of `--at final` and
//! `--at each-checkpoint` are made without an image at every failure point (on a long
//! trace that was most of a campaign's start); verdicts come from what the fault changed
//! in recovery's state and kernel log.

use persim_analyze::FaultOutcome;
use persim_image::FaultKind;
use persim_model::Strategy;
use persim_tester::{
    run_faults, run_test, Event, FaultOptions, FaultPlace, FaultsAt, Observer, PipelineOptions,
    RunDir, TestCase,
};

mod common;

use common::FakeGuest;

/// The failure points that got an image, by the last progress report.
#[derive(Default)]
struct Imaged(Option<u64>);

impl Observer for Imaged {
    fn event(&mut self, event: &Event) {
        if let Event::Replayed { failure_points, .. } = event {
            self.0 = Some(*failure_points);
        }
    }
}

fn journal_run(tmp: &std::path::Path, guest: &FakeGuest) -> (RunDir, TestCase) {
    let dir = RunDir::create(tmp.join("run")).unwrap();
    let test = TestCase::parse("description = \"journal\"\nops = [\"journal-update\"]\n").unwrap();
    let opts = PipelineOptions {
        strategy: Strategy::GlobalPrefix,
        ..PipelineOptions::default()
    };
    run_test(&opts, guest, "journal", &test, &dir, &mut ()).unwrap();
    (dir, test)
}

#[test]
fn only_the_chosen_points_get_an_uncorrupted_image() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal.trace");
    let (dir, test) = journal_run(tmp.path(), &guest);
    // examples/journal.trace has 7 failure points: 2 checkpoints, 4 fences and its end.
    for (at, points) in [(FaultsAt::Final, 1), (FaultsAt::EachCheckpoint, 3)] {
        let faults = FaultOptions {
            kinds: vec![FaultKind::BitFlip],
            places: vec![FaultPlace::Written],
            count: 2,
            seed: 7,
            at,
            range: None,
            data_writers: Vec::new(),
        };
        let mut imaged = Imaged::default();
        let out = tmp.path().join(at.to_string());
        let report = run_faults(&dir, &test, &guest, &faults, &out, &mut imaged).unwrap();
        assert_eq!(imaged.0, Some(points), "--at {at}");
        assert_eq!(report.faults.len(), 2 * points as usize, "--at {at}");
    }
    // The run's trace is replayed, never recorded again.
    assert_eq!(guest.records.get(), 1);
}

/// `--range`: faults land only in it, whatever the place; a range beyond PM is refused.
#[test]
fn a_range_limits_every_place() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal.trace");
    let (dir, test) = journal_run(tmp.path(), &guest);
    let faults = |range| FaultOptions {
        kinds: vec![FaultKind::BitFlip],
        places: vec![FaultPlace::Written, FaultPlace::Any],
        count: 8,
        seed: 3,
        at: FaultsAt::Final,
        range: Some(range),
        data_writers: Vec::new(),
    };
    // The commit flag's word (written) and the unwritten word after it.
    let out = tmp.path().join("flag");
    let report = run_faults(&dir, &test, &guest, &faults(0x40..0x50), &out, &mut ()).unwrap();
    let places = |place| report.faults.iter().filter(move |f| f.place == place);
    assert_eq!(places(FaultPlace::Written).count(), 8);
    assert!(places(FaultPlace::Written).all(|f| (0x40..0x48).contains(&f.fault.offset)));
    assert_eq!(places(FaultPlace::Any).count(), 8);
    assert!(places(FaultPlace::Any).all(|f| (0x40..0x50).contains(&f.fault.offset)));
    assert!(places(FaultPlace::Any).any(|f| f.fault.offset >= 0x48));
    let out = tmp.path().join("beyond");
    let e = run_faults(&dir, &test, &guest, &faults(0xff8..0x1008), &out, &mut ()).unwrap_err();
    assert!(e.to_string().contains("beyond the run's PM"), "{e}");
}

/// What NOVA prints at every mount, protected or not.
const BANNER: &str = "nova: measure timing 0, metadata checksum 0, wprotect 0, data checksum 0";

/// Bit flips in the fake's 16-byte value (0x100, never written by the journal trace), on
/// a subject whose recovery logs `recovery_log`: the outcome of each.
fn value_faults(recovery_log: fn(&mut [u8]) -> Vec<String>) -> Vec<FaultOutcome> {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest {
        recovery_log,
        ..FakeGuest::new("journal.trace")
    };
    let (dir, test) = journal_run(tmp.path(), &guest);
    let faults = FaultOptions {
        kinds: vec![FaultKind::BitFlip],
        places: vec![FaultPlace::Any],
        count: 6,
        seed: 5,
        at: FaultsAt::Final,
        range: Some(0x100..0x110),
        data_writers: Vec::new(),
    };
    let out = tmp.path().join("faults");
    let report = run_faults(&dir, &test, &guest, &faults, &out, &mut ()).unwrap();
    assert_eq!(report.faults.len(), 6);
    report.faults.iter().map(|f| f.outcome).collect()
}

/// A banner with detection words at every mount is no detection: the uncorrupted image's
/// recovery logs it too (that log was unknown when its state came from the run directory,
/// and every fault was called detected).
#[test]
fn a_message_every_recovery_prints_detects_nothing() {
    let outcomes = value_faults(|_| vec![BANNER.to_owned()]);
    assert!(
        outcomes.iter().all(|&o| o == FaultOutcome::Silent),
        "{outcomes:?}"
    );
}

/// Recovery that repairs the value and says so: the state is the uncorrupted one,
/// `corrected` rather than `masked`.
#[test]
fn a_repair_that_recovery_reports_is_corrected() {
    let outcomes = value_faults(|pm| {
        let mut log = vec![BANNER.to_owned()];
        if pm[0x100..0x110].iter().any(|&b| b != 0) {
            pm[0x100..0x110].fill(0);
            log.push("nova: checksum corruption repaired!".to_owned());
        }
        log
    });
    assert!(
        outcomes.iter().all(|&o| o == FaultOutcome::Corrected),
        "{outcomes:?}"
    );
}
