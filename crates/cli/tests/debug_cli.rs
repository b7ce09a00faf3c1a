//! `persim debug` and `persim analyze` on run directories and traces, run as a user
//! would (no VM: a run directory is laid out by hand through the tester's own types).

mod common;

use common::persim;
use persim_model::{CacheMode, Strategy};
use persim_tester::{Inputs, RunDir};
use std::path::Path;

/// One cached store that is fenced but never flushed: pending with volatile caches,
/// durable with persistent ones.
const UNFLUSHED: &str = "# persim-trace pm-size=0x1000\n\
                         write 0x40 0102030405060708\n\
                         fence sfence\n\
                         hypercall checkpoint 1\n";

/// A run directory holding `UNFLUSHED` as its trace, judged with `cache`.
fn run_dir(root: &Path, cache: CacheMode) -> RunDir {
    let dir = RunDir::create(root).unwrap();
    std::fs::write(dir.trace(), UNFLUSHED).unwrap();
    let inputs = Inputs {
        persim: "test".into(),
        test: "unflushed".into(),
        machine: "none".into(),
        strategy: Strategy::ProgramOrder,
        cache,
        max_images: 100,
        nt_prefixes: Default::default(),
        trace_key: String::new(),
        commands_key: String::new(),
        machine_key: String::new(),
        recovery_key: String::new(),
        config_file: None,
        images_key: String::new(),
        states_key: String::new(),
        reference: None,
        reference_key: String::new(),
        adopted_from: None,
    };
    std::fs::write(dir.inputs(), serde_json::to_string(&inputs).unwrap()).unwrap();
    dir
}

fn pending_lines(args: &[&str]) -> usize {
    let out = persim(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    state["lines"].as_array().unwrap().len()
}

#[test]
fn debug_at_replays_with_the_cache_mode_the_run_was_judged_with() {
    let tmp = tempfile::tempdir().unwrap();
    let persistent = run_dir(&tmp.path().join("persistent"), CacheMode::Persistent);
    let volatile = run_dir(&tmp.path().join("volatile"), CacheMode::Volatile);
    let at = |dir: &RunDir, extra: &[&str]| {
        let mut args = vec!["debug", "at", dir.root().to_str().unwrap()];
        args.extend(["--index", "2", "--json"]);
        args.extend(extra);
        pending_lines(&args)
    };
    assert_eq!(at(&persistent, &[]), 0, "the fence made the store durable");
    assert_eq!(at(&volatile, &[]), 1, "never flushed: still pending");
    // an explicit --cache still wins
    assert_eq!(at(&persistent, &["--cache", "volatile"]), 1);
}

#[test]
fn debug_lines_says_when_no_entry_touches_the_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.trace");
    std::fs::write(&trace, UNFLUSHED).unwrap();
    let out = persim(&[
        "debug",
        "lines",
        trace.to_str().unwrap(),
        "--lines",
        "0x800",
    ]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no entry of") && stderr.contains("line(s) 0x800"),
        "{stderr}"
    );
    let found = persim(&["debug", "lines", trace.to_str().unwrap(), "--lines", "0x47"]);
    let text = String::from_utf8_lossy(&found.stdout);
    assert!(text.contains("0: write 0x40"), "{text}");
}

#[test]
fn analyze_prints_text_and_json_and_fails_on_asked_kinds() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.trace");
    std::fs::write(&trace, UNFLUSHED).unwrap();
    let t = trace.to_str().unwrap();
    let text = persim(&["analyze", t]);
    assert_eq!(text.status.code(), Some(0));
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.contains("missing-persist at pc unknown: 1") && out.contains("checkpoint 1"),
        "{out}"
    );
    let json = persim(&["analyze", t, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["counts"]["missing-persist"], 1);
    assert_eq!(v["sites"][0]["examples"][0]["index"], 2);
    let fail = |kinds: &str| persim(&["analyze", t, "--fail-on", kinds]).status.code();
    assert_eq!(fail("missing-persist"), Some(1));
    assert_eq!(fail("redundant-fence,redundant-flush"), Some(0));
    let bad = persim(&["analyze", t, "--fail-on", "missing-flush"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr.contains("unknown pattern 'missing-flush'") && stderr.contains("missing-persist"),
        "{stderr}"
    );
}

/// Issue 42, 9: `--fail-on` counts the code judged, the program's unless `--code` says
/// otherwise; the kernel's finding is summarised after the program's clean bill.
#[test]
fn analyze_judges_the_programs_code_unless_told_whose() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.trace");
    let kernel = "# persim-trace pm-size=0x1000\n\
                  write 0x40 01 @ pc=0xffffffff81000010\n\
                  hypercall checkpoint 1\n";
    std::fs::write(&trace, kernel).unwrap();
    let t = trace.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = persim(&[&["analyze", t][..], args].concat());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.code(),
            text + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, text) = run(&["--fail-on", "missing-persist"]);
    assert_eq!(code, Some(0), "{text}");
    let clean = text.find("no finding in the program's code").expect(&text);
    let summary = text
        .find("1 finding in the kernel's code, summarised (--code kernel")
        .expect(&text);
    assert!(clean < summary, "{text}");
    let (code, text) = run(&["--fail-on", "missing-persist", "--code", "kernel"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("entry 1 addr 0x40"), "in full:\n{text}");
    let (code, text) = run(&["--code", "kernal"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("unknown owner of code 'kernal'"), "{text}");
}

#[test]
fn analyze_takes_the_run_directorys_cache_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let persistent = run_dir(&tmp.path().join("p"), CacheMode::Persistent);
    let json = persim(&["analyze", persistent.root().to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["cache"], "persistent");
    assert_eq!(v["counts"]["missing-persist"], 0, "the fence persisted it");
}

#[test]
fn profile_prints_a_table_and_draws_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.trace");
    std::fs::write(&trace, UNFLUSHED).unwrap();
    let plots = tmp.path().join("plots");
    let out = persim(&[
        "profile",
        trace.to_str().unwrap(),
        "--svg",
        plots.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().next().unwrap().starts_with("part"), "{table}");
    assert!(table.contains("stores by size: 8 B: 1"), "{table}");
    for name in [
        "bytes-over-time.svg",
        "epoch-sizes.svg",
        "written-lines.svg",
    ] {
        let svg = std::fs::read_to_string(plots.join(name)).unwrap();
        assert!(svg.starts_with("<svg"), "{name}");
    }
    let json = persim(&["profile", trace.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["total"]["bytes_cached"], 8);
}

#[test]
fn debug_at_shows_what_reads_explored_at_a_failure_point() {
    use persim_image::{ImagesJsonWriter, PointReads, PointRecord, PointSink};
    use persim_model::{Explored, FailureKind};
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_dir(&tmp.path().join("reads"), CacheMode::Volatile);
    let mut writer = ImagesJsonWriter::new(Vec::new());
    writer
        .point(&PointRecord {
            index: 1,
            kind: FailureKind::Fence,
            checkpoint: None,
            images: Vec::new(),
            incomplete: false,
            space: None,
            reads: Some(PointReads {
                fully_persisted: "ab".repeat(32),
                known: true,
                lines: Explored {
                    explored: vec![0x40],
                    skipped: vec![0x80],
                    from_previous: Vec::new(),
                },
                nt_prefixes: false,
                nt_images: Vec::new(),
            }),
            runtime_lines: vec![0xc0],
            outside_program_lines: vec![0x1000],
            protected_lines: Vec::new(),
            unreachable_blocks: Vec::new(),
            journal_violations: Vec::new(),
        })
        .unwrap();
    let json = writer.finish(&Default::default()).unwrap();
    std::fs::write(dir.images_index(), json).unwrap();
    let root = dir.root().to_str().unwrap();
    let out = persim(&["debug", "at", root, "--index", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("fully persisted image {}", "ab".repeat(32))),
        "{text}"
    );
    assert!(text.contains("explored: 0x40\n"), "{text}");
    assert!(
        text.contains("skipped (recovery does not read them): 0x80"),
        "{text}"
    );
    let out = persim(&["debug", "at", root, "--index", "1", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        text.contains("run-time data the program declared (followed the cut, not explored): 0xc0"),
        "{text}"
    );
    assert_eq!(json["reads"]["explored"], serde_json::json!([0x40]));
    assert_eq!(json["runtime_lines"], serde_json::json!([0xc0]));
    assert!(
        text.contains(
            "outside the program's PM (the kernel's; followed the cut, not explored): 0x1000"
        ),
        "{text}"
    );
    assert_eq!(json["outside_program_lines"], serde_json::json!([0x1000]));
    // another failure point has no reads section
    let out = persim(&["debug", "at", root, "--index", "2"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("reads:"));
}

#[test]
fn images_reads_from_needs_the_reads_strategy_and_traced_recoveries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_dir(&tmp.path().join("run"), CacheMode::Volatile);
    let trace = dir.trace();
    let (trace, root) = (trace.to_str().unwrap(), dir.root().to_str().unwrap());
    let out = persim(&[
        "images",
        trace,
        "--strategy",
        "global-prefix",
        "--reads-from",
        root,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only --strategy reads"));
    let out = persim(&["images", trace, "--strategy", "reads", "--reads-from", root]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no traced recoveries"));
    let out = persim(&["images", trace, "--strategy", "reads"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ext4 with its journal on PM, in small (docs/results/results.md, "Cross-media"): the commit on
/// PM is fenced while the file's data is still in the disk's volatile cache.
fn commit_before_disk_flush() -> String {
    format!(
        "# persim-trace pm-size=0x1000 blk-size=0x1000\n\
         hypercall checkpoint 1\nblkwrite 0x200 {}\nwrite 0x40 01\nflush clwb 0x40\n\
         fence sfence\nblkflush\nhypercall checkpoint 2\n",
        "dd".repeat(512)
    )
}

/// A report whose interval 1 -> 2 has the old state, one from the disk, and the new one.
fn report_with_a_state_from_the_disk() -> persim_analyze::Report {
    use persim_analyze::{CheckpointVerdict, Media, Report, StateInfo, Timings};
    let state = |k: usize, failure_points: &[u64], media: &[Media]| StateInfo {
        name: format!("c1s{k}"),
        outcome: persim_state::Outcome::State,
        partial_only: false,
        failure_points: failure_points.to_vec(),
        images: vec![format!("{k:064x}")],
        lines: None,
        media: media.to_vec(),
        times_set_by_recovery: false,
    };
    Report {
        test: "t".into(),
        fs: "f".into(),
        cache: CacheMode::Volatile,
        strategy: Strategy::ProgramOrder,
        checkpoints: vec![CheckpointVerdict {
            from: 1,
            to: 2,
            states: vec![
                state(0, &[0, 4], &[]),
                state(1, &[4, 5], &[Media::Disk]),
                state(2, &[4, 5, 6], &[]),
            ],
            final_states: vec!["c1s2".into()],
            single_final_state: true,
            atomic: false,
            errors: Vec::new(),
            culprits: Vec::new(),
            invariant: None,
            reference: None,
            expected: None,
        }],
        nt_prefixes: None,
        runtime_data: None,
        outside_program: None,
        journal_protected: None,
        journal_violations: Vec::new(),
        traced_nothing: false,
        timings: Timings::default(),
    }
}

#[test]
fn debug_at_names_the_media_of_the_states_at_a_failure_point_with_a_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let report = serde_json::to_string(&report_with_a_state_from_the_disk()).unwrap();
    let disk = run_dir(&tmp.path().join("disk"), CacheMode::Volatile);
    std::fs::write(disk.trace(), commit_before_disk_flush()).unwrap();
    std::fs::write(disk.report_json(), &report).unwrap();
    let root = disk.root().to_str().unwrap();
    let out = persim(&["debug", "at", root, "--index", "4"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("disk: 1 write(s) not flushed:\n  entry 1        blkwrite 0x200 (512 bytes)"),
        "{text}"
    );
    assert!(
        text.contains("states at failure point 4: c1s0, c1s1 (from the disk), c1s2"),
        "{text}"
    );
    let json = persim(&["debug", "at", root, "--index", "4", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["states"][1]["media"], serde_json::json!(["disk"]));
    assert_eq!(v["states"][0]["media"], serde_json::json!([]));
    assert_eq!(v["disk_writes"][0]["offset"], 0x200);
    // A run without a disk names no states and no disk writes.
    let pm_only = run_dir(&tmp.path().join("pm"), CacheMode::Volatile);
    std::fs::write(pm_only.report_json(), &report).unwrap();
    let root = pm_only.root().to_str().unwrap();
    let json = persim(&["debug", "at", root, "--index", "2", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        v.get("states").is_none() && v.get("disk_writes").is_none(),
        "{v}"
    );
}
