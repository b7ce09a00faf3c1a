//! The stages with a fake guest (no VM): verdicts, resuming at every stage boundary, a
//! corrupt state file, a lost image, a failed workload.

use persim_analyze::Mark;
use persim_model::Strategy;
use persim_tester::{
    run_test, Event, NtPrefixes, Observer, Pass, PipelineOptions, RunDir, Stage, TestCase,
};
use std::path::PathBuf;

mod common;

use common::FakeGuest;

#[derive(Default)]
struct Events(Vec<Event>);

impl Observer for Events {
    fn event(&mut self, event: &Event) {
        self.0.push(event.clone());
    }
}

impl Events {
    /// The trace's replays, in order.
    fn passes(&self) -> Vec<Pass> {
        self.0
            .iter()
            .filter_map(|e| match e {
                Event::Replaying(pass) => Some(*pass),
                _ => None,
            })
            .collect()
    }
}

fn test_case() -> TestCase {
    TestCase::parse("description = \"journal\"\nops = [\"journal-update\"]\n").unwrap()
}

fn global_prefix() -> PipelineOptions {
    PipelineOptions {
        strategy: Strategy::GlobalPrefix,
        ..PipelineOptions::default()
    }
}

/// Why a run into `dir` fails.
fn refusal(guest: &FakeGuest, dir: &RunDir) -> String {
    run_test(
        &global_prefix(),
        guest,
        "journal",
        &test_case(),
        dir,
        &mut (),
    )
    .unwrap_err()
    .to_string()
}

/// The report as JSON without its timings.
fn run(guest: &FakeGuest, dir: &RunDir, events: &mut Events) -> serde_json::Value {
    run_with(&global_prefix(), guest, dir, events)
}

fn run_with(
    opts: &PipelineOptions,
    guest: &FakeGuest,
    dir: &RunDir,
    events: &mut Events,
) -> serde_json::Value {
    let report = run_test(opts, guest, "journal", &test_case(), dir, events).unwrap();
    let mut json = serde_json::to_value(&report).unwrap();
    json["timings"] = serde_json::Value::Null;
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.report_json()).unwrap()).unwrap();
    assert_eq!(on_disk["checkpoints"], json["checkpoints"]);
    json
}

#[test]
fn a_correct_journal_is_atomic_and_a_missing_fence_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("ok")).unwrap();
    let report = run(
        &FakeGuest::new("journal.trace"),
        &dir,
        &mut Events::default(),
    );
    assert_eq!(report["checkpoints"][0]["atomic"], true, "{report:#}");
    assert_eq!(report["fs"], "fake");
    assert_eq!(report["strategy"], "global-prefix");

    let dir = RunDir::create(tmp.path().join("bug")).unwrap();
    let report = run(
        &FakeGuest::new("journal-missing-fence.trace"),
        &dir,
        &mut Events::default(),
    );
    let interval = &report["checkpoints"][0];
    assert_eq!(interval["atomic"], false, "{report:#}");
    assert!(
        interval["states"].as_array().unwrap().len() > 2,
        "{report:#}"
    );
    assert!(std::fs::read_to_string(dir.report_text())
        .unwrap()
        .contains("VIOLATION"));
}

#[test]
fn a_run_resumes_at_every_stage_boundary_with_the_same_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    let guest = FakeGuest::new("journal-missing-fence.trace");
    let first = run(&guest, &dir, &mut Events::default());
    let images = guest.extracted.get();
    assert_eq!((guest.records.get(), images > 2), (1, true));

    // Interrupted before the report: nothing is recorded or recovered again.
    std::fs::remove_file(dir.report_json()).unwrap();
    let mut events = Events::default();
    assert_eq!(run(&guest, &dir, &mut events), first);
    assert_eq!((guest.records.get(), guest.extracted.get()), (1, images));
    assert!(events.0.contains(&Event::Reused(Stage::Trace)));
    assert!(events.0.contains(&Event::Reused(Stage::Images)));

    // Interrupted before the images index was written: images again, states reused.
    std::fs::remove_file(dir.images_index()).unwrap();
    assert_eq!(run(&guest, &dir, &mut Events::default()), first);
    assert!(dir.images_index().is_file());
    assert_eq!((guest.records.get(), guest.extracted.get()), (1, images));

    // Interrupted during the states: only the missing one is recovered.
    let some_state = std::fs::read_dir(dir.states())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    std::fs::remove_file(some_state.path()).unwrap();
    assert_eq!(run(&guest, &dir, &mut Events::default()), first);
    assert_eq!(guest.extracted.get(), images + 1);

    // Without a complete trace (no initial image), it is recorded again.
    std::fs::remove_file(dir.recording().initial_image()).unwrap();
    assert_eq!(run(&guest, &dir, &mut Events::default()), first);
    assert_eq!(guest.records.get(), 2);
}

#[test]
fn a_corrupt_state_file_is_recovered_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    let guest = FakeGuest::new("journal.trace");
    let first = run(&guest, &dir, &mut Events::default());
    let images = guest.extracted.get();
    let some_state = std::fs::read_dir(dir.states())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    std::fs::write(some_state.path(), "{\"outcome\": \"sta").unwrap();
    assert_eq!(run(&guest, &dir, &mut Events::default()), first);
    assert_eq!(guest.extracted.get(), images + 1);
}

#[test]
fn a_lost_image_without_a_state_is_materialised_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    let guest = FakeGuest::new("journal-missing-fence.trace");
    let keep = PipelineOptions {
        keep_images: true,
        ..global_prefix()
    };
    let first = run_with(&keep, &guest, &dir, &mut Events::default());
    let images = guest.extracted.get();
    let state = std::fs::read_dir(dir.states())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let hash = state.file_stem().unwrap().to_str().unwrap().to_string();
    let image = dir.image_store().join(format!("{hash}.img"));
    std::fs::remove_file(&state).unwrap();
    std::fs::remove_file(&image).unwrap();
    assert_eq!(run_with(&keep, &guest, &dir, &mut Events::default()), first);
    assert_eq!(guest.extracted.get(), images + 1);
    let made = blake3::hash(&std::fs::read(&image).unwrap());
    assert_eq!(made.to_hex().as_str(), hash);
}

#[test]
fn a_failed_workload_is_an_error_that_names_the_operation_and_leaves_no_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    let mut guest = FakeGuest::new("journal.trace");
    guest.exit_code = 1;
    let test = TestCase::parse("description = \"x\"\nops = [\"rm x\"]\n").unwrap();
    let e = run_test(&global_prefix(), &guest, "x", &test, &dir, &mut ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("exit code 1") && e.contains("can't remove 'x'"),
        "{e}"
    );
    assert!(dir.recording().files().iter().all(|f| !f.exists()));
    assert!(!dir.report_json().exists());
}

#[test]
fn a_hang_names_the_operation_it_happened_in() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    let mut guest = FakeGuest::new("journal.trace");
    guest.hang = true;
    let test = TestCase::parse("description = \"x\"\nops = [\"touch a\", \"sleep 99\"]\n").unwrap();
    let e = run_test(&global_prefix(), &guest, "x", &test, &dir, &mut ()).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.starts_with(
            "the traced run stopped in operation 2 (`sleep 99`): the guest did not finish"
        ),
        "{e}"
    );
}

#[test]
fn a_directory_of_another_run_is_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    run(
        &FakeGuest::new("journal.trace"),
        &dir,
        &mut Events::default(),
    );

    let other = FakeGuest::new("journal-missing-fence.trace");
    let e = refusal(&other, &dir);
    assert!(
        e.contains("holds a run of test `journal` on fake") && e.contains("--force"),
        "{e}"
    );
    assert_eq!(other.records.get(), 0, "nothing ran");

    let forced = PipelineOptions {
        force: true,
        ..global_prefix()
    };
    let report = run_with(&forced, &other, &dir, &mut Events::default());
    assert_eq!(report["checkpoints"][0]["atomic"], false, "{report:#}");
    assert_eq!(other.records.get(), 1);

    std::fs::remove_file(dir.inputs()).unwrap();
    let e = refusal(&other, &dir);
    assert!(e.contains("no inputs.json"), "{e}");
}

/// Changes `dir`'s inputs.json as an older build of Persim would have written it.
fn edit_inputs(dir: &RunDir, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.inputs()).unwrap()).unwrap();
    edit(json.as_object_mut().unwrap());
    std::fs::write(dir.inputs(), serde_json::to_vec(&json).unwrap()).unwrap();
}

/// Why a run of `test` named `name` into `dir` fails.
fn refusal_of(guest: &FakeGuest, dir: &RunDir, name: &str, test: &TestCase) -> String {
    run_test(&global_prefix(), guest, name, test, dir, &mut ())
        .unwrap_err()
        .to_string()
}

#[test]
fn a_refusal_names_the_part_of_the_trace_that_differs_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    let guest = FakeGuest::new("journal.trace");
    run(&guest, &dir, &mut Events::default());
    let root = dir.root().display().to_string();
    let rejudge = format!("`persim run --trace-from {root} --out NEW` judges it again");
    let other_test = "The trace is of another test or machine: pass --force";
    let version = env!("CARGO_PKG_VERSION");

    let other_ops = TestCase::parse("description = \"j\"\nops = [\"journal-other\"]\n").unwrap();
    let e = refusal_of(&guest, &dir, "journal", &other_ops);
    assert!(
        e.contains(&format!(
            "holds a run of test `journal` on fake, recorded by Persim {version}; what differs \
             now: the test's commands (its setup or operations)."
        )) && e.contains(other_test),
        "{e}"
    );
    assert!(
        !e.contains("strategy"),
        "the strategy is no part of a trace: {e}"
    );
    let e = refusal_of(&guest, &dir, "other", &other_ops);
    assert!(
        e.contains("the test (`journal` then, `other` now); the test's commands")
            && e.contains(other_test),
        "{e}"
    );

    let xfs = FakeGuest {
        machine: "xfs",
        ..FakeGuest::new("journal.trace")
    };
    let e = refusal(&xfs, &dir);
    assert!(
        e.contains("what differs now: the machine (`fake` then, `xfs` now).")
            && e.contains(other_test),
        "{e}"
    );

    let rebuilt = FakeGuest::new("journal-missing-fence.trace");
    let e = refusal(&rebuilt, &dir);
    assert!(
        e.contains(
            "what differs now: the machine's configuration, kernel, guest tools or stack \
             traces (of `fake`). The trace is still of this test on this machine"
        ) && e.contains(&rejudge),
        "{e}"
    );

    edit_inputs(&dir, |inputs| {
        inputs.insert("persim".into(), "0.0.1".into());
        inputs.insert("trace_key".into(), "of 0.0.1".into());
    });
    let e = refusal(&guest, &dir);
    assert!(
        e.contains(&format!(
            "recorded by Persim 0.0.1; what differs now: Persim's version (0.0.1 then, \
             {version} now). The trace is still of this test"
        )) && e.contains(&rejudge),
        "{e}"
    );

    // An inputs.json from before the parts were recorded.
    edit_inputs(&dir, |inputs| {
        inputs.insert("persim".into(), version.into());
        inputs.remove("commands_key");
        inputs.remove("machine_key");
    });
    let e = refusal(&guest, &dir);
    assert!(
        e.contains(
            "(this inputs.json, of an older Persim, does not say which). If only Persim \
                    was rebuilt"
        ) && e.contains("--trace-from"),
        "{e}"
    );
    assert_eq!(
        (
            guest.records.get(),
            xfs.records.get(),
            rebuilt.records.get()
        ),
        (1, 0, 0),
        "nothing ran again"
    );
}

/// After a rebuild, a trace refused in place is judged again through --trace-from: its
/// images and states made again by this build, as a fresh run would.
#[test]
fn a_trace_of_an_older_build_is_judged_again_through_trace_from() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal-missing-fence.trace");
    let source = RunDir::create(tmp.path().join("source")).unwrap();
    run(&guest, &source, &mut Events::default());
    // What an older build wrote: another version, keys, and no parts of the trace's key.
    edit_inputs(&source, |inputs| {
        inputs.insert("persim".into(), "0.0.1".into());
        inputs.insert("trace_key".into(), "of 0.0.1".into());
        inputs.insert("images_key".into(), "of 0.0.1".into());
        inputs.insert("states_key".into(), "of 0.0.1".into());
        inputs.remove("commands_key");
        inputs.remove("machine_key");
    });
    assert!(refusal(&guest, &source).contains("--trace-from"));
    let extracted = guest.extracted.get();

    let again = RunDir::create(tmp.path().join("again")).unwrap();
    again.adopt_trace_from(&source).unwrap();
    let rejudged = run(&guest, &again, &mut Events::default());
    assert_eq!(guest.records.get(), 1, "judged without running again");
    assert!(
        guest.extracted.get() > extracted,
        "the older build's states are extracted again"
    );
    let fresh = run(
        &FakeGuest::new("journal-missing-fence.trace"),
        &RunDir::create(tmp.path().join("fresh")).unwrap(),
        &mut Events::default(),
    );
    assert_eq!(rejudged, fresh);
    let inputs = again.read_inputs().unwrap().unwrap();
    assert_eq!(inputs.persim, env!("CARGO_PKG_VERSION"));
    assert_eq!(inputs.adopted_from, None);
    // Resumed, it is this build's run now.
    run(&guest, &again, &mut Events::default());

    // A trace of another machine is not judged on this one.
    let elsewhere = RunDir::create(tmp.path().join("elsewhere")).unwrap();
    elsewhere.adopt_trace_from(&source).unwrap();
    let xfs = FakeGuest {
        machine: "xfs",
        ..FakeGuest::new("journal-missing-fence.trace")
    };
    let e = refusal(&xfs, &elsewhere);
    assert!(
        e.contains(&format!(
            "{} holds a trace of test `journal` on fake, recorded by Persim 0.0.1; what differs \
             now: the machine (`fake` then, `xfs` now); Persim's version",
            source.root().display()
        )) && e.contains("judge it with the --fs/--vm it was recorded with"),
        "{e}"
    );
    assert_eq!(xfs.extracted.get(), 0);
}

#[test]
fn another_strategy_rejudges_the_same_trace_and_keeps_known_states() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal-missing-fence.trace");
    let dir = RunDir::create(tmp.path().join("run")).unwrap();
    let program_order = PipelineOptions::default();
    let first = run_with(&program_order, &guest, &dir, &mut Events::default());
    assert_eq!(first["strategy"], "program-order");
    let before = guest.extracted.get();

    let rejudged = run_with(&global_prefix(), &guest, &dir, &mut Events::default());
    assert_eq!(guest.records.get(), 1, "the trace is reused");
    let fresh_dir = RunDir::create(tmp.path().join("fresh")).unwrap();
    let fresh_guest = FakeGuest::new("journal-missing-fence.trace");
    let fresh = run(&fresh_guest, &fresh_dir, &mut Events::default());
    assert_eq!(rejudged, fresh);
    // The "nothing" and "everything" images of program-order are among global-prefix's.
    assert!(
        guest.extracted.get() - before < fresh_guest.extracted.get(),
        "states of images seen under program-order are kept"
    );
}

#[test]
fn an_execution_is_judged_again_in_a_new_directory_without_running_it() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal-missing-fence.trace");
    let source = RunDir::create(tmp.path().join("source")).unwrap();
    run_with(
        &PipelineOptions::default(),
        &guest,
        &source,
        &mut Events::default(),
    );
    let again = RunDir::create(tmp.path().join("again")).unwrap();
    again.adopt_trace_from(&source).unwrap();
    let test = TestCase::load(&again.test()).unwrap();
    assert_eq!(test.ops, test_case().ops);
    let rejudged = run(&guest, &again, &mut Events::default());
    assert_eq!(guest.records.get(), 1, "judged without running again");
    assert_eq!(rejudged["strategy"], "global-prefix");
    assert_eq!(rejudged["checkpoints"][0]["atomic"], false);

    let e = again.adopt_trace_from(&source).unwrap_err().to_string();
    assert!(e.contains("already holds a run"), "{e}");
}

/// A run judged again names the code behind its violations as the first run did: the
/// symbols recorded beside the trace come along with it.
#[test]
fn a_run_judged_again_still_names_the_code() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = common::example_text("journal-missing-fence.trace").replace(
        "write 0x40 0100000000000000",
        "write 0x40 0100000000000000 @ pc=0xffffffff81000010",
    );
    let guest = FakeGuest {
        trace: trace.leak(),
        symbols: Some("ffffffff81000000 t commit_transaction\n"),
        ..FakeGuest::new("journal-missing-fence.trace")
    };
    let source = RunDir::create(tmp.path().join("source")).unwrap();
    run(&guest, &source, &mut Events::default());
    let named = |dir: &RunDir| {
        std::fs::read_to_string(dir.report_text())
            .unwrap()
            .contains("commit_transaction+0x10")
    };
    assert!(named(&source));
    let again = RunDir::create(tmp.path().join("again")).unwrap();
    again.adopt_trace_from(&source).unwrap();
    let rejudged = run(&guest, &again, &mut Events::default());
    assert_eq!(rejudged["checkpoints"][0]["atomic"], false);
    assert!(
        named(&again),
        "{}",
        std::fs::read_to_string(again.report_text()).unwrap()
    );
    let empty = RunDir::create(tmp.path().join("empty")).unwrap();
    let e = RunDir::create(tmp.path().join("x"))
        .unwrap()
        .adopt_trace_from(&empty)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a complete run directory"), "{e}");
}

#[test]
fn images_are_deleted_after_extraction_unless_kept_and_can_be_made_again() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal-missing-fence.trace");
    let small = RunDir::create(tmp.path().join("small")).unwrap();
    run(&guest, &small, &mut Events::default());
    let stored = |dir: &RunDir| -> Vec<PathBuf> {
        let mut images: Vec<PathBuf> = std::fs::read_dir(dir.image_store())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "img"))
            .collect();
        images.sort();
        images
    };
    assert!(stored(&small).is_empty());

    let kept = RunDir::create(tmp.path().join("kept")).unwrap();
    let keep = PipelineOptions {
        keep_images: true,
        ..global_prefix()
    };
    run_with(&keep, &guest, &kept, &mut Events::default());
    let images = stored(&kept);
    assert!(images.len() > 2);

    let hashes: Vec<String> = images
        .iter()
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_string())
        .collect();
    let out = tmp.path().join("again");
    let made = persim_tester::materialise_images(&small, &hashes, &out).unwrap();
    for (made, kept) in made.iter().zip(&images) {
        assert_eq!(std::fs::read(made).unwrap(), std::fs::read(kept).unwrap());
    }
    let e = persim_tester::materialise_images(&small, &["00".repeat(32)], &out)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no crash image"), "{e}");
}

fn reads() -> PipelineOptions {
    PipelineOptions {
        strategy: Strategy::Reads,
        ..PipelineOptions::default()
    }
}

/// `reads` traces each distinct fully persisted image's recovery once, explores only the
/// dirty lines it read (and, from the previous failure point, the log line that recovery
/// stopped reading), finds the reused log of the thesis' Figure 8.9 with fewer images than
/// `global-prefix`, records what it explored, and resumes without tracing again.
#[test]
fn reads_finds_the_reused_log_with_fewer_images_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal-log-reuse.trace");
    let dir = RunDir::create(tmp.path().join("reads")).unwrap();
    let mut events = Events::default();
    let report = run_with(&reads(), &guest, &dir, &mut events);
    assert_eq!(report["strategy"], "reads");
    assert_eq!(report["checkpoints"][0]["atomic"], false, "{report:#}");
    assert_eq!(report["checkpoints"][1]["atomic"], true, "{report:#}");
    let traced = guest.traced_reads.get();
    assert!(traced > 0);
    assert!(events
        .0
        .iter()
        .any(|e| matches!(e, Event::Finished(Stage::Reads, _))));

    let index = persim_image::ImagesIndex::read(&dir.images_index()).unwrap();
    let reused_log = index
        .failure_points
        .iter()
        .filter_map(|p| p.reads.as_ref())
        .find(|r| !r.lines.from_previous.is_empty())
        .expect("a failure point explores a line only the previous recovery read");
    assert_eq!(reused_log.lines.from_previous, vec![0x00]);
    assert!(reused_log.known);
    assert!(dir.read_set(&reused_log.fully_persisted).is_file());
    let images_of = |index: &persim_image::ImagesIndex| index.images.len();

    let global = RunDir::create(tmp.path().join("global")).unwrap();
    let global_report = run(&guest, &global, &mut Events::default());
    assert_eq!(global_report["checkpoints"][0]["atomic"], false);
    let global_index = persim_image::ImagesIndex::read(&global.images_index()).unwrap();
    assert!(
        images_of(&index) < images_of(&global_index),
        "reads {} images, global-prefix {}",
        images_of(&index),
        images_of(&global_index)
    );

    // Interrupted after the read pass: the read sets are reused, nothing is traced again.
    std::fs::remove_file(dir.images_index()).unwrap();
    std::fs::remove_file(dir.report_json()).unwrap();
    let again = run_with(&reads(), &guest, &dir, &mut Events::default());
    assert_eq!(guest.traced_reads.get(), traced);
    assert_eq!(again["checkpoints"], report["checkpoints"]);
}

/// `reads` traces a fully persisted image's recovery only when it differs from every image
/// traced before in a word that recovery read: the images after the stores to 0x200 and
/// 0x208, which the fake's recovery never reads, share the first image's read set and
/// state; the one after the store to 0x80, which it reads, is traced.
#[test]
fn reads_traces_an_image_only_when_it_differs_in_what_recovery_read() {
    let tmp = tempfile::tempdir().unwrap();
    let mut guest = FakeGuest::new("journal.trace");
    guest.trace = "# persim-trace pm-size=0x1000\n\
        hypercall start\nhypercall checkpoint 1\n\
        write 0x200 1111111111111111\nflush clwb 0x200\nfence sfence\n\
        write 0x208 2222222222222222\nflush clwb 0x200\nfence sfence\n\
        write 0x80 3333333333333333\nflush clwb 0x80\nfence sfence\n\
        hypercall checkpoint 2\nhypercall success\n";
    let dir = RunDir::create(tmp.path().join("reads")).unwrap();
    let report = run_with(&reads(), &guest, &dir, &mut Events::default());
    assert_eq!(guest.traced_reads.get(), 2, "{report:#}");
    // Three fully persisted images (one per fence; nothing is pending at the
    // checkpoints), each with a read set and a state.
    let read_sets: Vec<PathBuf> = std::fs::read_dir(dir.reads())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(read_sets.len(), 3, "{read_sets:?}");
    for set in &read_sets {
        let hash = set.file_stem().unwrap().to_str().unwrap();
        assert!(dir.state(hash).is_file(), "state {hash}");
    }
    // The states are those of tracing every image: before and after the store to 0x80.
    let states = report["checkpoints"][0]["states"].as_array().unwrap();
    assert_eq!(states.len(), 2, "{report:#}");
    assert_eq!(report["checkpoints"][0]["atomic"], true);
}

/// A crash image like an image whose recovery was traced (equal in every word that
/// recovery read) takes its state without a recovery: at the second fence, the image
/// without the store to 0x80 differs from the first fence's image only at 0x300, which
/// recovery did not read.
#[test]
fn a_crash_image_like_a_traced_one_takes_its_state_without_a_recovery() {
    let tmp = tempfile::tempdir().unwrap();
    let mut guest = FakeGuest::new("journal.trace");
    guest.trace = "# persim-trace pm-size=0x1000\n\
        hypercall start\nhypercall checkpoint 1\n\
        write 0x200 1111111111111111\nflush clwb 0x200\nfence sfence\n\
        write 0x80 3333333333333333\nwrite 0x300 2222222222222222\n\
        flush clwb 0x80\nflush clwb 0x300\nfence sfence\n\
        hypercall checkpoint 2\nhypercall success\n";
    let dir = RunDir::create(tmp.path().join("reads")).unwrap();
    let report = run_with(&reads(), &guest, &dir, &mut Events::default());
    assert_eq!(guest.traced_reads.get(), 2, "{report:#}");
    let index = persim_image::ImagesIndex::read(&dir.images_index()).unwrap();
    // Nothing durable at checkpoint 1, the two fences' images, and the one without 0x80.
    assert_eq!(index.images.len(), 4, "{index:#?}");
    assert_eq!(guest.extracted.get(), 2, "{report:#}");
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.report_json()).unwrap()).unwrap();
    let timings = &on_disk["timings"];
    assert_eq!(
        (&timings["recoveries"], &timings["traced"]),
        (&2.into(), &2.into())
    );
    assert_eq!(timings["shared"], 2, "{timings}");
    let states = report["checkpoints"][0]["states"].as_array().unwrap();
    assert_eq!(states.len(), 2, "{report:#}");
}

/// The thesis' Figure 8.12 through the pipeline: `reads` takes a line's NT stores all or
/// nothing, so a value written by two NT stores looks atomic with `--nt-prefixes off`;
/// `auto` finds the state that only NT stores give, explores their prefixes there, and
/// the torn value makes the interval non-atomic.
#[test]
fn nt_prefixes_auto_finds_the_value_torn_between_two_nt_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("nt-split-update.trace");
    let with = |nt_prefixes: NtPrefixes| PipelineOptions {
        nt_prefixes,
        ..reads()
    };
    let off = RunDir::create(tmp.path().join("off")).unwrap();
    let report = run_with(&with(NtPrefixes::Off), &guest, &off, &mut Events::default());
    assert_eq!(report["checkpoints"][0]["atomic"], true, "{report:#}");
    assert!(report.get("nt_prefixes").is_none());

    let auto = RunDir::create(tmp.path().join("auto")).unwrap();
    let mut events = Events::default();
    let report = run_with(&with(NtPrefixes::Auto), &guest, &auto, &mut events);
    // Once per pass: the read sets are traced once and serve both image passes.
    assert_eq!(
        events.passes(),
        [
            Pass::FullyPersisted,
            Pass::Images,
            Pass::NtPrefixes,
            Pass::Culprits
        ]
    );
    assert_eq!(report["checkpoints"][0]["atomic"], false, "{report:#}");
    assert_eq!(
        report["checkpoints"][0]["states"].as_array().unwrap().len(),
        3
    );
    let nt = &report["nt_prefixes"];
    assert_eq!(
        (nt["failure_points"].as_u64(), nt["new_states"].as_u64()),
        (Some(1), Some(1)),
        "{nt}"
    );
    assert!(nt["dependent_states"].as_u64().unwrap() >= 1);
    let text = std::fs::read_to_string(auto.report_text()).unwrap();
    assert!(text.contains("NT prefixes: "), "{text}");

    // resumed after the decision: the same verdict, no new decision
    let decision = std::fs::read(auto.nt_decision()).unwrap();
    std::fs::remove_file(auto.images_index()).unwrap();
    std::fs::remove_file(auto.report_json()).unwrap();
    let mut events = Events::default();
    let again = run_with(&with(NtPrefixes::Auto), &guest, &auto, &mut events);
    // The decision is known: the images are made with NT prefixes at once.
    assert_eq!(
        events.passes(),
        [Pass::FullyPersisted, Pass::Images, Pass::Culprits]
    );
    assert_eq!(again["checkpoints"], report["checkpoints"]);
    assert_eq!(again["nt_prefixes"], report["nt_prefixes"]);
    assert_eq!(std::fs::read(auto.nt_decision()).unwrap(), decision);
}

/// The test's invariants over the fake journal's states (examples/journal-missing-fence.trace,
/// not atomic: the commit flag can be durable with half the logged values): one that
/// allows that state turns the interval into "invariant holds"; one that allows only the
/// interval's two ends is broken by it, and the run is a violation.
#[test]
fn an_invariant_judges_the_states_between_the_ends() {
    let home = |first: &str, second: &str| [[first; 8], [second; 8]].concat().join(", ");
    let (old, new, half) = (home("00", "00"), home("11", "22"), home("11", "00"));
    let tmp = tempfile::tempdir().unwrap();
    let judge = |name: &str, invariant: String| {
        let test = TestCase::parse(&format!(
            "description = \"journal\"\nops = [\"journal-update\"]\ninvariant = ['{invariant}']\n"
        ))
        .unwrap();
        let dir = RunDir::create(tmp.path().join(name)).unwrap();
        let guest = FakeGuest::new("journal-missing-fence.trace");
        let report = run_test(&global_prefix(), &guest, "journal", &test, &dir, &mut ()).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.report_json()).unwrap()).unwrap();
        let text = std::fs::read_to_string(dir.report_text()).unwrap();
        (report, json["checkpoints"][0].clone(), text)
    };
    let is = |home: &str| format!("/home == \"[{home}]\"");

    let allowed = format!("{} or {} or {}", is(&old), is(&new), is(&half));
    let (report, interval, text) = judge("allowed", allowed);
    assert_eq!(report.violations(), 0, "{text}");
    assert_eq!(report.mark(), Mark::Atomic);
    assert_eq!(interval["atomic"], false, "{interval:#}");
    assert_eq!(
        interval["invariant"],
        serde_json::json!({"holds": true, "broken": []})
    );
    assert!(
        text.contains("checkpoint 1 -> 2: invariant holds (not atomic: 3 states)"),
        "{text}"
    );

    let ends = format!("{} or {}", is(&old), is(&new));
    let (report, interval, text) = judge("ends", ends.clone());
    assert_eq!(report.violations(), 1, "{text}");
    assert_eq!(report.mark(), Mark::InvariantViolation);
    let broken = &interval["invariant"]["broken"];
    assert_eq!(interval["invariant"]["holds"], false, "{interval:#}");
    assert_eq!(broken.as_array().unwrap().len(), 1, "{interval:#}");
    assert_eq!(
        broken[0]["why"],
        format!("/home is \"[{half}]\"; /home is \"[{half}]\"")
    );
    assert!(
        text.contains("checkpoint 1 -> 2: VIOLATION: invariant broken (1 states)"),
        "{text}"
    );
    let state = broken[0]["state"].as_str().unwrap();
    assert!(
        text.contains(&format!("  invariant `{ends}` broken in {state}: /home is")),
        "{text}"
    );
}

/// PM of the full-disk tests: 64 KiB, so a window of 32 images is 2 MiB.
const LARGE_PM: usize = 0x10000;

/// The journal of journal-missing-fence.trace in 64 KiB of PM, after 5 stores to lines of
/// their own in its first fence epoch: 195 distinct images under global-prefix.
fn many_images_guest() -> FakeGuest {
    let journal = common::example_text("journal-missing-fence.trace");
    let body = journal.split_once("hypercall checkpoint 1\n").unwrap().1;
    let mut trace =
        format!("# persim-trace pm-size={LARGE_PM:#x}\nhypercall start\nhypercall checkpoint 1\n");
    for i in 0..5 {
        trace += &format!("write {:#x} 01\n", 0x1000 + 0x40 * i);
    }
    trace += body;
    let mut guest = FakeGuest::new("journal-missing-fence.trace");
    guest.trace = trace.leak();
    // Data beyond what the trace writes makes every image file dense (no holes): each
    // takes its whole 64 KiB on disk.
    guest.initial = vec![0; LARGE_PM];
    guest.initial[0x2000..].fill(0xa5);
    guest
}

/// Every file under `dir` (recursively).
fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_run_with_more_images_than_the_disk_holds_keeps_a_window_of_them() {
    let test = "a_run_with_more_images_than_the_disk_holds_keeps_a_window_of_them";
    let tmp = tempfile::tempdir().unwrap();
    let free = run(
        &many_images_guest(),
        &RunDir::create(tmp.path().join("free")).unwrap(),
        &mut Events::default(),
    );
    let small = tmp.path().join("small");
    let Some(_fs) = persim_vm::testing::Tmpfs::mount(test, &small, "3584k") else {
        return;
    };
    let dir = RunDir::create(small.join("run")).unwrap();
    let guest = many_images_guest();
    // More than 100 images of 64 KiB: more than twice what the 3.5 MiB file system holds.
    let report = run(&guest, &dir, &mut Events::default());
    assert!(guest.extracted.get() > 100, "{}", guest.extracted.get());
    assert_eq!(report["checkpoints"], free["checkpoints"]);
    let states = std::fs::read_dir(dir.states()).unwrap().count();
    assert_eq!(states, guest.extracted.get(), "each image recovered once");
    let images = std::fs::read_dir(dir.image_store()).unwrap();
    assert!(images
        .flatten()
        .all(|f| !f.path().to_string_lossy().ends_with(".img")));
}

#[test]
fn a_run_out_of_space_stops_with_what_to_free_and_resumes_with_the_same_verdict() {
    let test = "a_run_out_of_space_stops_with_what_to_free_and_resumes_with_the_same_verdict";
    let tmp = tempfile::tempdir().unwrap();
    let keep = PipelineOptions {
        keep_images: true,
        ..global_prefix()
    };
    let guest = many_images_guest();
    let free = run_with(
        &keep,
        &guest,
        &RunDir::create(tmp.path().join("free")).unwrap(),
        &mut Events::default(),
    );
    let images = guest.extracted.get();
    let small = tmp.path().join("small");
    let Some(fs) = persim_vm::testing::Tmpfs::mount(test, &small, "1m") else {
        return;
    };
    let dir = RunDir::create(small.join("run")).unwrap();
    let guest = many_images_guest();
    // as the CLI prints it, with its causes
    let attempt = || {
        let e = run_test(&keep, &guest, "journal", &test_case(), &dir, &mut ()).unwrap_err();
        format!("{e:#}")
    };
    let nothing_half_written = || {
        assert!(!dir.images_index().exists() && !dir.report_json().exists());
        for file in files_under(dir.root()) {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.starts_with('.'), "a temporary file is left: {name}");
            if name.ends_with(".img") {
                assert_eq!(std::fs::metadata(&file).unwrap().len(), LARGE_PM as u64);
            }
        }
    };
    let store = dir.image_store().display().to_string();

    // Not even one window (2 MiB) fits in 1 MiB: refused before any image is made.
    let e = attempt();
    assert!(
        e.contains(&format!(
            "not enough space on tmpfs for the crash images in {store}"
        )) && e.contains("(2 MiB needed"),
        "{e}"
    );
    assert_eq!(guest.extracted.get(), 0);
    nothing_half_written();

    // One window fits, but the kept images leave no room for the next.
    fs.resize("3584k");
    let e = attempt();
    assert!(e.contains(&store) && e.contains("--keep-images"), "{e}");
    assert!(e.contains("the same command resumes it"), "{e}");
    let recovered = guest.extracted.get();
    assert!(
        recovered > 0 && recovered < images,
        "{recovered} of {images}"
    );
    nothing_half_written();

    // With space, the same command resumes: nothing is recovered twice.
    fs.resize("64m");
    let resumed = run_with(&keep, &guest, &dir, &mut Events::default());
    assert_eq!(resumed["checkpoints"], free["checkpoints"]);
    assert_eq!(guest.extracted.get(), images);
}

/// A fake reference configuration: `trace` recorded by a machine called `name`.
fn reference(name: &'static str, trace: &'static str) -> Option<Box<FakeGuest>> {
    Some(Box::new(FakeGuest {
        machine: name,
        trace,
        ..FakeGuest::new("journal.trace")
    }))
}

#[test]
fn a_reference_is_traced_once_kept_in_the_run_directory_and_its_difference_is_a_violation() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = common::example_text("journal.trace");
    // The same operations giving another result on the reference: other home values.
    let other = journal
        .replace("write 0x80 1111111111111111", "write 0x80 3333333333333333")
        .leak();
    let mut guest = FakeGuest::new("journal.trace");
    guest.reference = reference("ref-a", journal);

    let dir = RunDir::create(tmp.path().join("same")).unwrap();
    let mut events = Events::default();
    let report = run_test(
        &global_prefix(),
        &guest,
        "journal",
        &test_case(),
        &dir,
        &mut events,
    )
    .unwrap();
    assert_eq!(report.violations(), 0, "{}", report.to_text());
    let check = report.checkpoints[0].reference.as_ref().unwrap();
    assert!(check.matches() && check.against == "ref-a", "{check:?}");
    assert!(report.timings.reference.is_some());
    let states = dir.read_reference_states().unwrap().unwrap();
    assert_eq!(states.at.keys().copied().collect::<Vec<_>>(), [2]);
    assert_eq!(
        events.passes(),
        [Pass::Reference, Pass::Images, Pass::Culprits]
    );
    let referenced = guest.reference.as_ref().unwrap();
    assert_eq!(
        (referenced.records.get(), referenced.extracted.get()),
        (1, 1)
    );
    assert!(
        !dir.reference_images().exists() && !dir.reference_recording().trace().exists(),
        "the reference's images and trace are gone once recovered"
    );
    let inputs = dir.read_inputs().unwrap().unwrap();
    assert_eq!(inputs.reference.as_deref(), Some("ref-a"));

    // Again into the same directory: the reference's states are reused.
    let mut events = Events::default();
    let report = run_test(
        &global_prefix(),
        &guest,
        "journal",
        &test_case(),
        &dir,
        &mut events,
    )
    .unwrap();
    assert!(events.0.contains(&Event::Reused(Stage::Reference)));
    assert_eq!(report.timings.reference, None);
    assert_eq!(guest.reference.as_ref().unwrap().records.get(), 1);

    // Judged again elsewhere (`--trace-from`): reused too, while the reference is the same.
    let again = RunDir::create(tmp.path().join("again")).unwrap();
    again.adopt_trace_from(&dir).unwrap();
    let strategy = PipelineOptions {
        strategy: Strategy::ProgramOrder,
        ..PipelineOptions::default()
    };
    run_test(&strategy, &guest, "journal", &test_case(), &again, &mut ()).unwrap();
    assert_eq!(guest.reference.as_ref().unwrap().records.get(), 1);

    // Another reference (another machine) is not silently reused: it runs, and differs.
    guest.reference = reference("ref-b", other);
    let report = run_test(&strategy, &guest, "journal", &test_case(), &again, &mut ()).unwrap();
    assert_eq!(guest.reference.as_ref().unwrap().records.get(), 1);
    assert_eq!(report.violations(), 1, "{}", report.to_text());
    assert_eq!(report.mark(), Mark::WrongFinalState);
    let check = report.checkpoints[0].reference.as_ref().unwrap();
    assert_eq!(check.against, "ref-b");
    assert_eq!(check.differs[0].fields, ["home"]);
    let text = std::fs::read_to_string(again.report_text()).unwrap();
    assert!(
        text.contains("VIOLATION: final state differs from reference")
            && text.contains("differs from reference ref-b (- ref-b, + c1s"),
        "{text}"
    );
    assert_eq!(
        again.read_inputs().unwrap().unwrap().reference.as_deref(),
        Some("ref-b")
    );

    // Without a reference the check is gone, and the run's verdict is its own again.
    guest.reference = None;
    let report = run_test(&strategy, &guest, "journal", &test_case(), &again, &mut ()).unwrap();
    assert_eq!(report.checkpoints[0].reference, None);
    assert_eq!(report.violations(), 0);
    assert!(!again.reference().exists());
}

#[test]
fn a_test_s_expected_contents_are_checked_without_a_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let guest = FakeGuest::new("journal.trace");
    // The fake's state: {"home": "[11, …]", "value": …}, a program's own JSON.
    let test = |home: &str| {
        TestCase::parse(&format!(
            "description = \"journal\"\nops = [\"journal-update\"]\n\
             [expect.1]\n\"home\" = {{ x = 1 }}\n\"/home\" = \"{home}\"\n"
        ))
    };
    // Paths are absolute; the fake's fields are no fs-dump's, so this one is refused.
    let e = format!("{:#}", test("x").unwrap_err());
    assert!(e.contains("absolute"), "{e}");
    let parse = |expect: &str| {
        TestCase::parse(&format!(
            "description = \"journal\"\nops = [\"journal-update\"]\n{expect}"
        ))
        .unwrap()
    };
    let right = parse("[expect.1]\n\"/home\" = false\n");
    let dir = RunDir::create(tmp.path().join("right")).unwrap();
    let report = run_test(&global_prefix(), &guest, "journal", &right, &dir, &mut ()).unwrap();
    assert!(report.checkpoints[0].expected.as_ref().unwrap().matches());
    assert_eq!(report.violations(), 0);
    let wrong = parse("[expect.1]\n\"/home\" = \"Hello\"\n");
    let dir = RunDir::create(tmp.path().join("wrong")).unwrap();
    let report = run_test(&global_prefix(), &guest, "journal", &wrong, &dir, &mut ()).unwrap();
    assert_eq!(report.violations(), 1);
    assert_eq!(report.mark(), Mark::WrongFinalState);
    assert!(report
        .to_text()
        .contains("final state differs from expected"));
}

/// A traced run that wrote nothing to PM or the disk (a test that writes where nothing is
/// mounted) tested nothing: the report says so and it is no clean pass.
#[test]
fn a_run_that_wrote_nothing_is_no_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let quiet = "# persim-trace pm-size=0x1000\nhypercall start\nhypercall checkpoint 1\n\
                 read 0x40 8\nfence sfence\nhypercall checkpoint 2\nhypercall success\n";
    for (trace, nothing) in [
        (quiet, true),
        (common::example_text("journal.trace"), false),
    ] {
        let guest = FakeGuest {
            trace,
            ..FakeGuest::new("journal.trace")
        };
        let dir = RunDir::create(tmp.path().join(nothing.to_string())).unwrap();
        let report = run_test(&global_prefix(), &guest, "t", &test_case(), &dir, &mut ()).unwrap();
        let text = std::fs::read_to_string(dir.report_text()).unwrap();
        assert_eq!(report.traced_nothing, nothing, "{text}");
        assert_eq!(report.passed(), !nothing, "{text}");
        assert_eq!(text.contains("nothing tested"), nothing, "{text}");
        if nothing {
            assert_eq!(report.mark(), Mark::NothingTraced);
        }
    }
}
