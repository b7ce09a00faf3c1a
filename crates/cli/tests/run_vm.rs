//! `persim run` and `persim report` end to end in the real VM (QEMU, Debian kernel,
//! ext4-DAX). Skipped with a message when those are not installed, except under CI.

mod common;

use common::{data, persim, run_on_vm, run_test, run_test_file, vm_ready};
use serde_json::Value;
use std::path::Path;

fn report(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap()
}

/// A test of `calls`: four system calls of one process (fs-ops), a checkpoint after each
/// from the process itself, no `sync` between them, each expected durable when it returns.
/// ext4 makes a write durable only at fsync: the pwrite that returned before it was durable
/// is found (the bug a PM file system's write path can have), the fsync is not.
#[test]
fn a_test_of_calls_finds_a_write_that_returned_before_it_was_durable() {
    if !vm_ready("a_test_of_calls_finds_a_write_that_returned_before_it_was_durable") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("calls");
    let run = run_test_file("calls.toml", &out, &[]);
    let report = report(&out);
    let checkpoints = report["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 4, "{report:#}");
    let differs = |c: &Value| c["expected"]["differs"].as_array().map_or(0, Vec::len);
    assert_eq!(differs(&checkpoints[1]), 1, "the write: {report:#}");
    assert_eq!(differs(&checkpoints[2]), 0, "the fsync: {report:#}");
    assert_eq!(run.status.code(), Some(1), "{report:#}");
    let output = std::fs::read_to_string(out.join("output.txt")).unwrap();
    assert!(
        output.contains("== operation 2: write /mnt/f 0 4096 1"),
        "{output}"
    );
}

#[test]
fn hello_world_is_atomic_on_ext4_dax() {
    if !vm_ready("hello_world_is_atomic_on_ext4_dax") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "hello-world",
        "--out",
        o,
        "-q",
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let r = report(&out);
    assert_eq!(
        (r["test"].as_str(), r["fs"].as_str()),
        (Some("hello-world"), Some("ext4-dax"))
    );
    let interval = &r["checkpoints"][0];
    assert_eq!(
        (interval["from"].as_u64(), interval["to"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(interval["atomic"], true);
    let states = interval["states"].as_array().unwrap();
    assert_eq!(states.len(), 2, "before and after the write: {interval}");
    assert_eq!(interval["final_states"], serde_json::json!(["c1s1"]));
    for stage in [
        "trace.ptrace",
        "trace.ptrace.initial",
        "images.json",
        "images/index.json",
        "report.txt",
    ] {
        assert!(out.join(stage).is_file(), "{stage}");
    }
    // the evidence: the new state has the file with its contents
    let diff = persim(&["report", o, "--diff"]);
    assert_eq!(diff.status.code(), Some(0));
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(text.contains("checkpoint 1 -> 2: atomic"), "{text}");
    let final_image = states[1]["images"][0].as_str().unwrap();
    let state =
        std::fs::read_to_string(out.join("states").join(format!("{final_image}.json"))).unwrap();
    assert!(
        state.contains("/mnt/myfile") && state.contains("HelloWorld\\\\n"),
        "{state}"
    );
    // the operation ran once, inside the trace: the first state is before it
    let first_image = states[0]["images"][0].as_str().unwrap();
    let before =
        std::fs::read_to_string(out.join("states").join(format!("{first_image}.json"))).unwrap();
    assert!(!before.contains("/mnt/myfile"), "{before}");
    let output = std::fs::read_to_string(out.join("output.txt")).unwrap();
    assert_eq!(output.matches("== operation 1:").count(), 1, "{output}");
    // ext4's lost+found is left out by the VM configuration's dump_exclude
    assert!(!state.contains("lost+found"), "{state}");
    // a second run of the same directory resumes: nothing is recorded again
    let again = persim(&["run", "--fs", "ext4", "--test", "hello-world", "--out", o]);
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stderr).contains("reusing the recorded trace"));
    assert_eq!(report(&out)["checkpoints"], r["checkpoints"]);

    // the run directory keeps states, not images; an image is made again on demand
    let images: Vec<_> = std::fs::read_dir(out.join("images"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "img")
        })
        .collect();
    assert!(images.is_empty(), "{images:?}");
    let made = dir.path().join("made");
    let debug = persim(&[
        "debug",
        "image",
        o,
        "--hash",
        final_image,
        "-o",
        made.to_str().unwrap(),
    ]);
    assert_eq!(
        debug.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&debug.stderr)
    );
    let bytes = std::fs::read(made.join(format!("{final_image}.img"))).unwrap();
    assert_eq!(blake3::hash(&bytes).to_hex().as_str(), final_image);

    // the same execution judged again with another cache mode, without running it
    let again_dir = dir.path().join("persistent");
    let rejudged = persim(&[
        "run",
        "--fs",
        "ext4",
        "--trace-from",
        o,
        "--cache",
        "persistent",
        "--out",
        again_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&rejudged.stderr);
    assert_eq!(rejudged.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("reusing the recorded trace"), "{stderr}");
    let r2 = report(&again_dir);
    assert_eq!(
        (r2["test"].as_str(), r2["cache"].as_str()),
        (Some("hello-world"), Some("persistent"))
    );

    // a directory of this run is not taken for a run of another test
    let other = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "rename-overwrite",
        "--out",
        o,
        "-q",
    ]);
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds a run of test `hello-world`") && stderr.contains("--force"),
        "{stderr}"
    );
}

#[test]
fn two_durable_steps_in_one_interval_are_not_atomic() {
    if !vm_ready("two_durable_steps_in_one_interval_are_not_atomic") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let run = run_test_file("two-steps.toml", &out, &[]);
    assert_eq!(
        run.status.code(),
        Some(1),
        "violations found: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let interval = &report(&out)["checkpoints"][0];
    assert_eq!(interval["atomic"], false);
    assert_eq!(interval["single_final_state"], true);
    assert!(
        interval["states"].as_array().unwrap().len() >= 3,
        "{interval}"
    );
    let diff = persim(&["report", o, "--diff", "--failure-points"]);
    assert_eq!(diff.status.code(), Some(1));
    let text = String::from_utf8_lossy(&diff.stdout);
    // "not atomic (N states)" may follow "recovery failed, ": when a timer interrupt lands
    // inside the in-place write of the group-descriptor block, its serializing return is
    // a fence there, and an image with half a descriptor is one ext4 refuses to mount
    // (it checks descriptors before replaying the journal; docs/results/results.md).
    assert!(
        text.contains("VIOLATION: ")
            && text.contains("not atomic (")
            && text.contains("+   \"/mnt/first\""),
        "{text}"
    );
}

/// The correct ring buffer in the VM: under `global-prefix`, which reorders lines, every
/// append of every ringbuf test is atomic with one final state, in both cache modes, and
/// each interval's final state holds one entry more than its first.
#[test]
fn ringbuf_suite_is_atomic_in_both_cache_modes() {
    if !vm_ready("ringbuf_suite_is_atomic_in_both_cache_modes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for cache in ["volatile", "persistent"] {
        let out = dir.path().join(cache);
        let suite = persim(&[
            "suite",
            "ringbuf",
            "--fs",
            "ext4",
            "--cache",
            cache,
            "--strategy",
            "global-prefix",
            "--out",
            out.to_str().unwrap(),
        ]);
        let results: Value =
            serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
        let tests = results["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 4, "{results}");
        for test in tests {
            assert_eq!(test["mark"], "✓", "{cache}: {test}");
            let name = test["test"].as_str().unwrap();
            let report = report(&out.join(name));
            let intervals = report["checkpoints"].as_array().unwrap();
            assert!(intervals.len() >= 2, "{cache} {name}: {report}");
            for interval in intervals {
                let entries = |state: &str| {
                    let hash = interval["states"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["name"] == state)
                        .unwrap()["images"][0]
                        .as_str()
                        .unwrap()
                        .to_string();
                    let recovered: Value = serde_json::from_slice(
                        &std::fs::read(out.join(name).join(format!("states/{hash}.json"))).unwrap(),
                    )
                    .unwrap();
                    let dump: Value =
                        serde_json::from_str(recovered["dump"].as_str().unwrap()).unwrap();
                    dump["entries"].as_array().unwrap().len()
                };
                let first = interval["states"][0]["name"].as_str().unwrap();
                let last = interval["final_states"][0].as_str().unwrap();
                assert_eq!(
                    entries(last),
                    entries(first) + 1,
                    "{cache} {name}: {interval}"
                );
            }
        }
        assert_eq!(suite.status.code(), Some(0), "{cache}: {results}");
    }
}

/// `persim run` of `examples/<example>/<test>.toml` on the example's VM configuration.
/// `persim run` of `DIR/TEST.toml` on `DIR/vm.toml`, DIR relative to the repository.
fn run_example(dir: &str, test: &str, strategy: &str, out: &Path) -> std::process::Output {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    run_on_vm(
        &example.join("vm.toml"),
        example.join(format!("{test}.toml")).to_str().unwrap(),
        out,
        &["--strategy", strategy],
    )
}

/// The worked example of docs/guides/pm-program.md, "A raw libpmem program", found by
/// `global-prefix` and by the recovery-guided `reads` (whose traced recovery reads the
/// balances' line), in the interval the program marks with persim_checkpoint(). The program and libpmem have no frame pointers: its stores and
/// flushes still name their call chain, through the program's and the libraries' ELF
/// symbols at the addresses the run had them.
#[test]
fn own_program_example_finds_the_torn_transfer() {
    if !vm_ready("own_program_example_finds_the_torn_transfer") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for strategy in ["global-prefix", "reads"] {
        let out = dir.path().join(strategy);
        let run = run_example("examples/own-program", "transfer", strategy, &out);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(
            run.status.code(),
            Some(1),
            "{strategy}: violations found: {stderr}"
        );
        let report = report(&out);
        // The one interval the program marked with persim_checkpoint(1) and (2).
        let intervals = report["checkpoints"].as_array().unwrap();
        assert_eq!(intervals.len(), 1, "{strategy}: {report:#}");
        let interval = &intervals[0];
        assert_eq!(
            (&interval["from"], &interval["to"]),
            (&1.into(), &2.into()),
            "{strategy}: {interval}"
        );
        assert_eq!(interval["atomic"], false, "{strategy}: {interval}");
        assert_eq!(
            interval["single_final_state"], true,
            "{strategy}: {interval}"
        );
        let torn: Vec<serde_json::Value> = interval["states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let hash = s["images"][0].as_str().unwrap();
                let state: serde_json::Value = serde_json::from_slice(
                    &std::fs::read(out.join("states").join(format!("{hash}.json"))).unwrap(),
                )
                .unwrap();
                serde_json::from_str(state["dump"].as_str().unwrap()).unwrap()
            })
            .filter(|balances: &serde_json::Value| balances["sum"] != 100)
            .collect();
        assert!(
            !torn.is_empty(),
            "{strategy}: a state that breaks the invariant: {interval}"
        );
    }
    let print = persim(&[
        "trace",
        "print",
        dir.path().join("reads/trace.ptrace").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&print.stdout);
    // The first entry of `op` done in user mode (the kernel flushes too, on page faults).
    let user_pc = |line: &str| {
        let pc = line
            .split_once("pc=0x")
            .and_then(|(_, pc)| pc.split([' ', ',']).next());
        pc.and_then(|pc| u64::from_str_radix(pc, 16).ok())
            .is_some_and(|pc| pc < 1 << 47)
    };
    let described = |op: &str| {
        text.lines()
            .filter(|l| l.starts_with(op) && user_pc(l))
            .find_map(|l| l.split_once("  # "))
            .map(|(_, code)| code.to_owned())
            .unwrap_or_else(|| panic!("no symbolised user `{op}` in\n{text}"))
    };
    let store = described("write ");
    assert!(store.starts_with("main+0x"), "{store}");
    assert!(store.contains(" [transfer] (transfer.c:"), "{store}");
    let flush = described("flush ");
    assert!(
        flush.contains("pmem_persist+0x") && flush.contains(" [libpmem.so.1] < main+0x"),
        "{flush}"
    );
    assert!(flush.ends_with(" [transfer]"), "{flush}");
    // The program's own persim_checkpoint(), not the guest's `hypercall` tool.
    for n in [1, 2] {
        let checkpoint = described(&format!("hypercall checkpoint {n}"));
        assert!(
            checkpoint.starts_with("main+0x") && checkpoint.contains(" [transfer]"),
            "{checkpoint}"
        );
    }
}

/// A libpmemobj program under `--strategy reads` (examples/pmdk-tx): the correct
/// transaction is atomic, with few images although libpmemobj leaves run-time fields
/// dirty in the pool at every failure point; changing the balances inside the
/// transaction without adding them to it leaves several final states.
#[test]
fn pmdk_transaction_is_atomic_and_an_unlogged_change_is_found_with_reads() {
    if !vm_ready("pmdk_transaction_is_atomic_and_an_unlogged_change_is_found_with_reads") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |test: &str| {
        let out = dir.path().join(test);
        let run = run_example("examples/pmdk-tx", test, "reads", &out);
        let images = std::fs::read_dir(out.join("states")).unwrap().count();
        (run.status.code(), report(&out), images)
    };
    let (code, correct, images) = run("accounts-tx");
    assert_eq!(code, Some(0), "{correct:#}");
    assert_eq!(correct["checkpoints"][0]["atomic"], true);
    assert!(
        images < 100,
        "{images} images for a run global-prefix needs thousands for"
    );
    let (code, unlogged, _) = run("accounts-tx-unlogged");
    assert_eq!(code, Some(1), "{unlogged:#}");
    assert_eq!(
        unlogged["checkpoints"][0]["single_final_state"], false,
        "{unlogged:#}"
    );
    // The report names the code: the program's own unflushed stores to the balances (one
    // line, one call site), and the library's run-time data recovery never reads apart.
    let culprits = unlogged["checkpoints"][0]["culprits"].as_array().unwrap();
    let named: Vec<&serde_json::Value> = culprits
        .iter()
        .filter(|c| c["what"] == "not flushed at checkpoint 2")
        .collect();
    assert_eq!(named.len(), 1, "{culprits:#?}");
    assert_eq!(
        named[0]["lines"].as_array().unwrap().len(),
        1,
        "{culprits:#?}"
    );
    assert!(
        culprits.iter().any(|c| c["what"]
            .as_str()
            .unwrap()
            .ends_with("on lines recovery never reads")
            && c["stores"].as_u64().unwrap() > 100),
        "{culprits:#?}"
    );
}

/// PMDK's rtree_map example (targets/pmdk-examples) under `--strategy reads`: inserting a
/// key that splits a node is atomic as shipped; with PmemSanitizer's bug re-created (the
/// node's `key_size` and `key` changed without `TX_ADD`) a crash loses a key that was
/// there before, and the report names the unlogged stores in `rtree_map_insert_value`.
#[test]
fn pmdk_rtree_insert_without_tx_add_loses_a_key_with_reads() {
    if !vm_ready("pmdk_rtree_insert_without_tx_add_loses_a_key_with_reads") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |test: &str| {
        let out = dir.path().join(test);
        let run = run_example("targets/pmdk-examples/tests", test, "reads", &out);
        (run.status.code(), report(&out))
    };
    // Whether any recovered state lost key 1, which was in the map before and after.
    let lost_key_1 = |test: &str| {
        std::fs::read_dir(dir.path().join(test).join("states"))
            .unwrap()
            .any(|state| {
                let state: Value =
                    serde_json::from_slice(&std::fs::read(state.unwrap().path()).unwrap()).unwrap();
                let dump: Value = serde_json::from_str(state["dump"].as_str().unwrap()).unwrap();
                dump["lookup"]["1"] == false
            })
    };
    let (code, shipped) = run("rtree-insert");
    assert_eq!(code, Some(0), "{shipped:#}");
    assert_eq!(shipped["checkpoints"][0]["atomic"], true, "{shipped:#}");
    assert!(!lost_key_1("rtree-insert"));
    let (code, buggy) = run("rtree-insert-value");
    assert_eq!(code, Some(1), "{buggy:#}");
    let interval = &buggy["checkpoints"][0];
    assert_eq!(interval["single_final_state"], false, "{interval:#}");
    assert!(lost_key_1("rtree-insert-value"), "{interval:#}");
    assert!(
        interval["culprits"].as_array().unwrap().iter().any(|c| {
            let site = c["site"].as_str().unwrap_or_default();
            c["what"] == "not flushed at checkpoint 2"
                && site.starts_with("rtree_map_insert+")
                && site.contains("(rtree_map.c:")
        }),
        "{interval:#}"
    );
}

/// A program that declares its PM statistics run-time data with include/persim.h
/// (examples/runtime-data): the plugin records the range in PM offsets, `global-prefix`
/// lets those lines follow the cut, and the verdicts are those of the same program
/// without the declaration, from fewer images.
#[test]
fn declared_run_time_data_spares_images_and_keeps_the_verdicts() {
    if !vm_ready("declared_run_time_data_spares_images_and_keeps_the_verdicts") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |test: &str| {
        let out = dir.path().join(test);
        let run = run_example("examples/runtime-data", test, "global-prefix", &out);
        let report = report(&out);
        assert_eq!(run.status.code(), Some(0), "{test}: {report:#}");
        let verdicts: Vec<(Value, Value)> = report["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["atomic"].clone(), c["single_final_state"].clone()))
            .collect();
        let images = std::fs::read_dir(out.join("states")).unwrap().count();
        (out, report, verdicts, images)
    };
    let (declared_dir, declared, verdicts, images) = run("tally");
    let (_, undeclared, undeclared_verdicts, undeclared_images) = run("tally-undeclared");
    assert_eq!(verdicts, undeclared_verdicts);
    assert_eq!(verdicts.len(), 2);
    assert!(
        images < undeclared_images,
        "{images} images with the declaration, {undeclared_images} without"
    );
    // The statistics: five lines (tally.c's struct), dirty at the failure points of both adds.
    assert_eq!(declared["runtime_data"]["lines"], 5, "{declared:#}");
    assert!(undeclared.get("runtime_data").is_none(), "{undeclared:#}");
    let print = persim(&[
        "trace",
        "print",
        declared_dir.join("trace.ptrace").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&print.stdout);
    let calls: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("hypercall volatile "))
        .collect();
    assert_eq!(calls.len(), 2, "one per run of the program:\n{text}");
    for call in calls {
        let size = call.split_whitespace().nth(3).unwrap();
        assert_eq!(
            size, "0x140",
            "the statistics' 320 bytes, all in PM: {call}"
        );
        assert!(call.contains("main+0x"), "symbolised: {call}");
    }
}

/// `persim generate ace --seq 1` into `dir/seq1`: that directory and its files' names, sorted.
fn generate_seq1(dir: &Path) -> (std::path::PathBuf, Vec<String>) {
    let generated = dir.join("seq1");
    let gen = persim(&[
        "generate",
        "ace",
        "--seq",
        "1",
        "--out",
        generated.to_str().unwrap(),
    ]);
    assert!(gen.status.success(), "{gen:?}");
    let mut names: Vec<String> = std::fs::read_dir(&generated)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (generated, names)
}

#[test]
fn generated_ace_tests_run_their_exact_operations_as_a_suite() {
    if !vm_ready("generated_ace_tests_run_their_exact_operations_as_a_suite") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (generated, names) = generate_seq1(dir.path());
    let picked = dir.path().join("picked");
    assert_eq!(names.len(), 47, "{names:?}");
    // An attribute, a hole and a directory rename: none of them expressible with busybox.
    std::fs::create_dir(&picked).unwrap();
    let wanted = [
        "setxattr-Afoo",
        "falloc-foo-punch-hole-0-4096",
        "rename-A-B",
    ];
    for w in wanted {
        let name = names
            .iter()
            .find(|n| n.ends_with(&format!("-{w}.toml")))
            .unwrap();
        std::fs::copy(generated.join(name), picked.join(name)).unwrap();
    }
    let results = dir.path().join("results");
    let suite = persim(&[
        "suite",
        picked.to_str().unwrap(),
        "--fs",
        "ext4",
        "--out",
        results.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(suite.status.code(), Some(0), "{suite:?}");
    for w in wanted {
        let name = names
            .iter()
            .find(|n| n.ends_with(&format!("-{w}.toml")))
            .unwrap();
        let report = report(&results.join(name.trim_end_matches(".toml")));
        let interval = &report["checkpoints"][0];
        // the operation ran and changed the state: an old and a new state, atomic
        assert_eq!(interval["atomic"], true, "{w}: {report:#}");
        assert_eq!(
            interval["states"].as_array().unwrap().len(),
            2,
            "{w}: {report:#}"
        );
    }
}

/// A generated overwrite (ACE seq1 `write foo 60 8`: 8 bytes across a cache line of the 8 KiB
/// the setup wrote with tag 0, written with tag 1) on ext4-DAX under `program-order`: the
/// kernel stores the aligned half with a non-temporal store and the unaligned one cached,
/// flushed later, and the timestamps come with the journal commit after both. So a crash
/// leaves the new bytes under the old timestamps, or only the second half of them: states
/// that differ from the state before only in the file's contents. With the bytes of the
/// file offset alone (the setup's and the write's bytes equal) they were one state.
#[test]
fn a_generated_overwrite_is_seen_landed_and_torn() {
    if !vm_ready("a_generated_overwrite_is_seen_landed_and_torn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (generated, names) = generate_seq1(dir.path());
    let name = names.iter().find(|n| n.ends_with("-write-foo-60-8.toml"));
    let test = generated.join(name.unwrap());
    let out = dir.path().join("run");
    let run = run_test(&test, &out, &[]);
    let report = report(&out);
    assert!(run.status.code().is_some_and(|c| c < 2), "{run:?}");
    let interval = &report["checkpoints"][0];
    let dumps: Vec<(String, Value)> = interval["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let dump = state_dump(&out, &s["images"][0]);
            (s["name"].as_str().unwrap().to_owned(), dump)
        })
        .collect();
    let contents = |dump: &Value| -> Vec<u8> {
        dump["/mnt/foo"]["contents"]
            .as_str()
            .unwrap()
            .as_bytes()
            .to_vec()
    };
    let without_contents = |dump: &Value| {
        let mut dump = dump.clone();
        dump["/mnt/foo"].as_object_mut().unwrap().remove("contents");
        dump
    };
    // before the write (the first state) and after it (the one final state)
    let before = &dumps[0].1;
    let final_name = interval["final_states"][0].as_str().unwrap();
    let after = &dumps.iter().find(|(name, _)| name == final_name).unwrap().1;
    let (old, new) = (contents(before), contents(after));
    assert_eq!(old.len(), 8192, "{interval:#}");
    let changed: Vec<usize> = (0..old.len()).filter(|&i| old[i] != new[i]).collect();
    assert_eq!(
        changed,
        (60..68).collect::<Vec<_>>(),
        "the write changes each byte it overwrites, and only those"
    );
    // the states with the timestamps of before: the write lost, landed, or torn
    let old_times: Vec<&(String, Value)> = dumps
        .iter()
        .filter(|(_, d)| without_contents(d) == without_contents(before))
        .collect();
    let landed = old_times.iter().any(|(_, d)| contents(d) == new);
    let torn: Vec<&str> = old_times
        .iter()
        .filter(|(_, d)| {
            let c = contents(d);
            let from_old = changed.iter().filter(|&&i| c[i] == old[i]).count();
            let from_new = changed.iter().filter(|&&i| c[i] == new[i]).count();
            c.len() == old.len()
                && (0..c.len()).all(|i| c[i] == old[i] || c[i] == new[i])
                && from_old > 0
                && from_new > 0
        })
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(
        landed && !torn.is_empty(),
        "a state with the new bytes and one with part of them, both under the old \
         timestamps: {}",
        std::fs::read_to_string(out.join("report.txt")).unwrap()
    );
    assert_eq!(interval["atomic"], false, "{interval:#}");
}

/// The state of `image` (a hash in `run`'s report) as fs-dump printed it.
fn state_dump(run: &Path, image: &Value) -> Value {
    let file = run
        .join("states")
        .join(format!("{}.json", image.as_str().unwrap()));
    let saved: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    match saved["dump"].as_str() {
        Some(text) => serde_json::from_str(text).unwrap(),
        None => saved,
    }
}

/// Each state of `run`'s report, per interval, as fs-dump printed it, without the times
/// (a guest's clock runs on between tests).
fn states_without_times(run: &Path) -> Vec<(bool, bool, Vec<Value>)> {
    let report = report(run);
    let state = |image: &Value| -> Value {
        let mut dump = state_dump(run, image);
        for entry in dump
            .as_object_mut()
            .into_iter()
            .flat_map(|d| d.values_mut())
        {
            for time in ["atime", "ctime", "mtime"] {
                entry.as_object_mut().map(|e| e.remove(time));
            }
        }
        dump
    };
    report["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let mut states: Vec<Value> = c["states"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| c["final_states"].as_array().unwrap().contains(&s["name"]))
                .map(|s| state(&s["images"][0]))
                .collect();
            states.sort_by_key(|s| s.to_string());
            (
                c["atomic"].as_bool().unwrap(),
                c["single_final_state"].as_bool().unwrap(),
                states,
            )
        })
        .collect()
}

#[test]
fn warm_guests_give_each_test_the_results_of_a_fresh_boot() {
    if !vm_ready("warm_guests_give_each_test_the_results_of_a_fresh_boot") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("tests");
    std::fs::create_dir(&tests).unwrap();
    // The first test fills PM with data a later test must not see (a file system made
    // over it, not a blank PM, could show it in a file that grows without its data).
    std::fs::write(
        tests.join("1-fill.toml"),
        "description = \"fill\"\nops = [\"yes stale | head -c 200000 > /mnt/big\", \"mkdir /mnt/d\"]\n",
    )
    .unwrap();
    let suite_tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../suites/fs");
    for (name, from) in [("2-append", "append.toml"), ("3-truncate", "truncate.toml")] {
        std::fs::copy(suite_tests.join(from), tests.join(format!("{name}.toml"))).unwrap();
    }
    let warm = dir.path().join("warm");
    let suite = persim(&[
        "suite",
        tests.to_str().unwrap(),
        "--fs",
        "ext4",
        "--out",
        warm.to_str().unwrap(),
        "-q",
    ]);
    // truncate is not atomic on ext4-DAX (docs/results/results.md); the others are
    assert_eq!(suite.status.code(), Some(1), "{suite:?}");
    let results: Value =
        serde_json::from_slice(&std::fs::read(warm.join("results.json")).unwrap()).unwrap();
    let marks: Vec<&str> = results["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["mark"].as_str().unwrap())
        .collect();
    assert_eq!(marks, ["✓", "✓", "A"], "{results:#}");
    for name in ["1-fill", "2-append", "3-truncate"] {
        let fresh = dir.path().join(name);
        let run = run_test(&tests.join(format!("{name}.toml")), &fresh, &[]);
        assert!(run.status.code().is_some_and(|c| c < 2), "{run:?}");
        let (warm, fresh) = (
            states_without_times(&warm.join(name)),
            states_without_times(&fresh),
        );
        assert!(!fresh.is_empty() && fresh.iter().all(|(_, _, s)| !s.is_empty()));
        assert_eq!(
            warm, fresh,
            "{name}: a warm guest's results differ from a fresh one's"
        );
    }
}

/// ext4 on the NVMe disk with its journal on PM: the trace holds the disk's writes, crash
/// images are PM and disk together, and recovery sees both (the file's data lives on the
/// disk, its metadata's commit on PM).
#[test]
fn a_cross_media_file_system_is_recovered_from_pm_and_disk_together() {
    if !vm_ready("a_cross_media_file_system_is_recovered_from_pm_and_disk_together") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/ext4-pmjournal.toml");
    let run = run_on_vm(&config, "hello-world", &out, &[]);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    // Whether the disk is flushed before checkpoint 2 depends on timing (docs/results/results.md).
    assert!(matches!(run.status.code(), Some(0 | 1)), "{printed}");
    let initial = std::fs::metadata(out.join("trace.ptrace.blk-initial")).unwrap();
    assert_eq!(initial.len(), 64 << 20, "the disk's contents at the start");
    let (_, entries) = persim_trace::read_all(&out.join("trace.ptrace")).unwrap();
    let data = entries.iter().any(|e| {
        matches!(&e.op, persim_trace::Op::BlkWrite { data, .. } if data.starts_with(b"HelloWorld\n"))
    });
    assert!(data, "the file's data is a disk write");
    // The file's data is on the disk: a state with it was recovered from an image whose
    // disk part holds that write, a state without the file from one before the commit.
    let dumps: Vec<String> = std::fs::read_dir(out.join("states"))
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .collect();
    assert!(
        dumps
            .iter()
            .any(|d| d.contains(r#"\"contents\": \"HelloWorld\\n\""#)),
        "{dumps:?}"
    );
    assert!(
        dumps.iter().any(|d| !d.contains("/mnt/myfile")),
        "{dumps:?}"
    );
}

/// With `--reproducible`, the same test twice gives the same trace, initial image, crash
/// images, states and report, byte for byte, timings aside (docs/design/tracer.md,
/// "Reproducibility"); the first run may make the booted snapshot that the second restores.
#[test]
fn a_reproducible_run_twice_gives_identical_traces_images_states_and_reports() {
    if !vm_ready("a_reproducible_run_twice_gives_identical_traces_images_states_and_reports") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for fs in ["ext4", "xfs"] {
        let runs = ["a", "b"].map(|name| {
            let out = dir.path().join(format!("{fs}-{name}"));
            let run = persim(&[
                "run",
                "--fs",
                fs,
                "--test",
                "hello-world",
                "--reproducible",
                "--out",
                out.to_str().unwrap(),
                "-q",
            ]);
            assert_eq!(run.status.code(), Some(0), "{fs}: {run:?}");
            out
        });
        let read = |run: &Path, file: &str| std::fs::read(run.join(file)).unwrap();
        for file in ["trace.ptrace", "trace.ptrace.initial", "images.json"] {
            assert!(
                read(&runs[0], file) == read(&runs[1], file),
                "{fs}: {file} differs between two runs"
            );
        }
        let states = |run: &Path| {
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(run.join("states"))
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().into_string().unwrap(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect();
            files.sort();
            files
        };
        let first_states = states(&runs[0]);
        assert!(!first_states.is_empty());
        assert!(first_states == states(&runs[1]), "{fs}: the states differ");
        let without_timings = |run: &Path| {
            let mut report = report(run);
            report.as_object_mut().unwrap().remove("timings");
            let text = String::from_utf8(read(run, "report.txt")).unwrap();
            let text: Vec<String> = text
                .lines()
                .filter(|l| !l.starts_with("timings:"))
                .map(str::to_owned)
                .collect();
            (report, text)
        };
        assert_eq!(
            without_timings(&runs[0]),
            without_timings(&runs[1]),
            "{fs}: the reports differ"
        );
    }
}

/// `persim run --vm vm/<config>.toml` of `examples/block-durability/<test>.toml` into
/// `dir/<config>-<test>`, checked to exit with `exit`: the run directory, and its first
/// interval's final states' file contents, each the old pattern (`fs-ops write`, "old")
/// or the zeros of the overwrite ("new"), and that interval of the report.
fn block_durability_final_contents(
    dir: &Path,
    config: &str,
    test: &str,
    exit: i32,
) -> (std::path::PathBuf, Vec<&'static str>, Value) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = dir.join(format!("{config}-{test}"));
    let run = run_on_vm(
        &root.join(format!("vm/{config}.toml")),
        root.join(format!("examples/block-durability/{test}.toml"))
            .to_str()
            .unwrap(),
        &out,
        &[],
    );
    assert_eq!(run.status.code(), Some(exit), "{config} {test}: {run:?}");
    let checkpoint = report(&out)["checkpoints"][0].clone();
    let image_of = |name: &Value| {
        let state = checkpoint["states"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| &s["name"] == name)
            .unwrap();
        state["images"][0].as_str().unwrap().to_owned()
    };
    let contents = checkpoint["final_states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| {
            let dump = std::fs::read_to_string(
                out.join("states").join(format!("{}.json", image_of(name))),
            )
            .unwrap();
            if dump.contains(r#"\"contents\": \"abcdefgh"#) {
                "old"
            } else if dump.contains(r#"\"contents\": \"\\u0000\\u0000"#) {
                "new"
            } else {
                panic!("{config} {test}: neither the old block nor the new one: {dump}")
            }
        })
        .collect();
    (out, contents, checkpoint)
}

/// ext4 on the NVMe disk alone (examples/block-durability): an O_DIRECT overwrite reaches
/// the disk's volatile cache, so without fsync a crash may keep the old block or the new
/// one (two final states, the unflushed write named by its code), and with fsync only the
/// new one is final.
#[test]
fn on_a_disk_an_fsynced_write_survives_and_an_unsynced_one_may_not() {
    if !vm_ready("on_a_disk_an_fsynced_write_survives_and_an_unsynced_one_may_not") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let final_contents = |test: &str, exit: i32| {
        block_durability_final_contents(dir.path(), "ext4-nvme", test, exit)
    };
    let (_, mut unsynced, checkpoint) = final_contents("unsynced", 1);
    unsynced.sort();
    assert_eq!(unsynced, ["new", "old"]);
    // The one disk write no flush covered. Its site is the code that rang the doorbell:
    // dd's system call, or the block layer dispatching later from an interrupt.
    let culprit = &checkpoint["culprits"][0];
    assert_eq!(
        (&culprit["disk"], &culprit["stores"]),
        (&Value::Bool(true), &Value::from(1)),
        "{checkpoint}"
    );
    let (_, fsynced, _) = final_contents("fsync", 0);
    assert_eq!(fsynced, ["new"]);
}

/// ext4 on dm-dpwc (targets/dpwc, vm/ext4-dpwc.toml: the log on PM, the origin on the
/// SSD): the fsync'd overwrite is acknowledged from the PM log, and every crash image,
/// recovered by loading the table (which replays the log) and mounting, holds it once
/// the fsync returned: one final state, the zeros. The overwrite's entry is in the
/// trace: the log's header and data stored to PM.
#[test]
fn on_dpwc_an_fsynced_write_survives_every_crash() {
    let test = "on_dpwc_an_fsynced_write_survives_every_crash";
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/ext4-dpwc.toml");
    let config = persim_vm::VmConfig::load(&config).unwrap();
    if persim_vm::testing::vm_ready(test, &config).is_none()
        || persim_vm::testing::kmod_ready(test, &config, "dm-dpwc").is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, fsynced, checkpoint) =
        block_durability_final_contents(dir.path(), "ext4-dpwc", "fsync", 0);
    assert_eq!(fsynced, ["new"], "{checkpoint}");
    let (_, entries) = persim_trace::read_all(&out.join("trace.ptrace")).unwrap();
    let logged = entries.iter().any(|e| {
        matches!(&e.op, persim_trace::Op::Write { data, nt: true, .. } if data.starts_with(b"DPWE"))
    });
    assert!(logged, "no entry header of the log stored to PM");
}

/// Exact bytes per process: two writers overwrite files laid out (and synced) in setup, so
/// no block is allocated or zeroed, and the inode's journal commit is jbd2's: a DAX write
/// stores exactly its data to PM in the writer's context.
#[test]
fn profile_by_process_gives_two_concurrent_overwriters_exactly_their_bytes() {
    if !vm_ready("profile_by_process_gives_two_concurrent_overwriters_exactly_their_bytes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("two.ptrace");
    let t = trace.to_str().unwrap();
    let setup = "dd if=/dev/zero of=/mnt/a bs=4096 count=16 2>/dev/null && \
                 dd if=/dev/zero of=/mnt/b bs=4096 count=4 2>/dev/null && sync";
    let cmd = "dd if=/dev/zero of=/mnt/a bs=4096 count=16 conv=notrunc 2>/dev/null & \
               dd if=/dev/zero of=/mnt/b bs=4096 count=4 conv=notrunc 2>/dev/null & wait";
    let traced = persim(&[
        "trace", "--fs", "ext4", "--setup", setup, "--cmd", cmd, "-o", t,
    ]);
    assert_eq!(
        traced.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&traced.stderr)
    );
    let out = persim(&["profile", t, "--by", "process", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut dd: Vec<(u64, u64)> = a["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["name"] == "dd")
        .map(|g| {
            let bytes = g["bytes_cached"].as_u64().unwrap() + g["bytes_nt"].as_u64().unwrap();
            (bytes, g["pid"].as_u64().unwrap())
        })
        .collect();
    dd.sort();
    assert_eq!(dd.len(), 2, "two dd processes: {}", a["groups"]);
    assert_ne!(dd[0].1, dd[1].1);
    assert_eq!([dd[0].0, dd[1].0], [16384, 65536], "{}", a["groups"]);
}

/// vm/zfs-slog.toml's path when the VM and OpenZFS's modules are there; else the test is
/// skipped with the reason printed.
fn zfs_slog_ready(test: &str) -> Option<std::path::PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/zfs-slog.toml");
    let config = persim_vm::VmConfig::load(&path).unwrap();
    let how = "build OpenZFS's modules with `PERSIM_ZFS=1 scripts/setup.sh` or \
               `scripts/build-kmods.sh --zfs` (docs/design/zfs-slog.md)";
    persim_vm::testing::vm_ready(test, &config)?;
    persim_vm::testing::optional_kmod_ready(test, &config, "zfs/zfs", how)?;
    Some(path)
}

/// OpenZFS with its intent log on PM (vm/zfs-slog.toml, docs/design/zfs-slog.md): the fsync'd overwrite
/// is acknowledged once its log record is on PM, and every crash image, recovered by
/// importing the pool (which claims the log) and mounting (which replays it), holds it
/// once the fsync returned: one final state, the zeros. The log record is in the trace:
/// the block written to PM holds the overwrite's zeros and its ZIL chain's magic.
#[test]
fn on_zfs_with_a_pm_log_an_fsynced_write_survives_every_crash() {
    if zfs_slog_ready("on_zfs_with_a_pm_log_an_fsynced_write_survives_every_crash").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, fsynced, checkpoint) =
        block_durability_final_contents(dir.path(), "zfs-slog", "fsync", 0);
    assert_eq!(fsynced, ["new"], "{checkpoint}");
    // A log block's trailer (zil_chain_t) starts with ZEC_MAGIC.
    let magic = ZIL_BLOCK_MAGIC.to_le_bytes();
    let (_, entries) = persim_trace::read_all(&out.join("trace.ptrace")).unwrap();
    let logged = entries.iter().any(|e| {
        matches!(&e.op, persim_trace::Op::Write { data, .. } if data.windows(8).any(|w| w == magic))
    });
    assert!(logged, "no ZIL block written to PM");
}

/// vm/zfs-pmem.toml's path when the VM and ZIL-PMEM's OpenZFS modules are there; else the
/// test is skipped with the reason printed.
fn zfs_pmem_ready(test: &str) -> Option<std::path::PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/zfs-pmem.toml");
    let config = persim_vm::VmConfig::load(&path).unwrap();
    let how = "build OpenZFS's modules with ZIL-PMEM's patches with \
               `scripts/build-kmods.sh --zfs-pmem` (docs/design/zil-pmem.md)";
    persim_vm::testing::vm_ready(test, &config)?;
    persim_vm::testing::optional_kmod_ready(test, &config, "zfs-pmem/zfs", how)?;
    Some(path)
}

/// vm/zfs-pmem.toml's pool GUID (`zpool reguid -g`), which every ZIL-PMEM entry header
/// carries at byte 8, and the magic that starts a stock ZIL block's trailer (zil_chain_t).
const ZFS_PMEM_POOL_GUID: u64 = 5_784_110_818_711_765_569;
const ZIL_BLOCK_MAGIC: u64 = 0x0210_da7a_b10c_7a11;

/// How many PM writes of a trace hold a ZIL-PMEM entry header of vm/zfs-pmem.toml's pool,
/// and how many a stock ZIL block.
fn zil_pmem_writes(trace: &Path) -> (usize, usize) {
    let guid = ZFS_PMEM_POOL_GUID.to_le_bytes();
    let magic = ZIL_BLOCK_MAGIC.to_le_bytes();
    let (_, entries) = persim_trace::read_all(trace).unwrap();
    let count = |needle: &[u8]| {
        entries
            .iter()
            .filter(|e| {
                matches!(&e.op, persim_trace::Op::Write { data, .. }
                    if data.windows(8).any(|w| w == needle))
            })
            .count()
    };
    (count(&guid), count(&magic))
}

/// The ZIL-PMEM entries of vm/zfs-pmem.toml's pool that the PM of a trace holds at its
/// end, each its PM offset, header (124 bytes) and body.
fn zil_pmem_entries(trace: &Path) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    let guid = ZFS_PMEM_POOL_GUID.to_le_bytes();
    let (_, entries) = persim_trace::read_all(trace).unwrap();
    let mut pm = std::collections::HashMap::new();
    let mut headers = std::collections::BTreeSet::new();
    for e in &entries {
        if let persim_trace::Op::Write { addr, data, .. } = &e.op {
            for (i, &b) in data.iter().enumerate() {
                pm.insert(addr + i as u64, b);
            }
            for i in (0..data.len().saturating_sub(7)).filter(|&i| data[i..i + 8] == guid) {
                headers.insert(addr + i as u64 - 8);
            }
        }
    }
    let bytes = |at: u64, len: u64| {
        (at..at + len)
            .map(|a| pm.get(&a).copied())
            .collect::<Option<Vec<u8>>>()
    };
    headers
        .into_iter()
        // Later stores (a freed chunk's zeroed header, a reused chunk) replace some.
        .filter_map(|at| bytes(at, 124).filter(|h| h[8..16] == guid).map(|h| (at, h)))
        .map(|(at, header)| {
            let len = u32::from_le_bytes(header[56..60].try_into().unwrap());
            let body = bytes(at + 256, u64::from(len)).unwrap();
            (at, header, body)
        })
        .collect()
}

/// How many ZIL-PMEM entry headers of vm/zfs-pmem.toml's pool the PM of a trace holds at
/// its end, each checked against the Rust engine's format: its CRC32C over the 120 bytes of
/// fields, and the body's (the kernel computes them with SSE4.2's crc32 when it can).
fn zil_pmem_entries_checked(trace: &Path) -> usize {
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let entries = zil_pmem_entries(trace);
    for (_, header, body) in &entries {
        assert_eq!(
            crc32c::crc32c(&header[..120]),
            u32_at(header, 120),
            "header"
        );
        assert_eq!(crc32c::crc32c(body), u32_at(header, 60), "body");
    }
    entries.len()
}

/// ZIL-PMEM's OpenZFS (vm/zfs-pmem.toml) on the pool that asks for it: the fsync'd
/// overwrite survives every crash, and it was logged as ZIL-PMEM entries written to PM
/// with CPU stores, never as a stock ZIL block, with the Rust engine's checksums. The traced
/// run ends before the next txg sync, so the final image holds the overwrite only through
/// replay from PM.
#[test]
fn on_zfs_with_zil_pmem_an_fsynced_write_survives_every_crash() {
    if zfs_pmem_ready("on_zfs_with_zil_pmem_an_fsynced_write_survives_every_crash").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, fsynced, checkpoint) =
        block_durability_final_contents(dir.path(), "zfs-pmem", "fsync", 0);
    assert_eq!(fsynced, ["new"], "{checkpoint}");
    let (entries, blocks) = zil_pmem_writes(&out.join("trace.ptrace"));
    assert!(entries >= 1, "no ZIL-PMEM entry header written to PM");
    assert_eq!(blocks, 0, "a stock ZIL block was written");
    assert!(zil_pmem_entries_checked(&out.join("trace.ptrace")) >= 1);
}

/// Bit flips in the ZIL-PMEM entries of the fsync'd overwrite (`persim faults` on the bytes
/// the test wrote, the final image): each is caught by a checksum, a header field no crash
/// leaves, or a dependency left unmet, so the log is kept and the mount refused (the
/// recovery fails: `zfs mount`'s error is the detail) or the kernel log says what replay
/// left out; none is replayed silently (the campaign exits 0). A replay that skipped the
/// body checksum would apply a flipped body: silent.
#[test]
fn zil_pmem_reports_every_bit_flip_in_its_entries() {
    let Some(config) = zfs_pmem_ready("zil_pmem_reports_every_bit_flip_in_its_entries") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (out, fsynced, checkpoint) =
        block_durability_final_contents(dir.path(), "zfs-pmem", "fsync", 0);
    assert_eq!(fsynced, ["new"], "{checkpoint}");
    let all = zil_pmem_faults(
        dir.path(),
        &out,
        &config,
        &["--kind", "bitflip", "--where", "written", "--count", "8"],
    );
    // A flip in the zero header after the entry changes nothing (masked), or is reported
    // with the state unchanged (corrected); every other one must be reported.
    let reported = all.iter().filter(|f| f["outcome"] == "detected").count();
    assert!(reported >= all.len() / 2, "{all:#?}");
}

/// `persim faults` with `args` on the ZIL-PMEM run in `out`, one job: none silent (exit 0),
/// at least 6 faults, each masked, corrected, or detected by the mount's refusal or the
/// kernel log's ZIL-PMEM line. Returns the faults of faults.json.
fn zil_pmem_faults(dir: &Path, out: &Path, config: &Path, args: &[&str]) -> Vec<Value> {
    let campaign = dir.join("faults");
    let mut argv = vec![
        "faults",
        out.to_str().unwrap(),
        "--vm",
        config.to_str().unwrap(),
    ];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["-j", "1", "-q", "--out", campaign.to_str().unwrap()]);
    let faults = persim(&argv);
    let stdout = String::from_utf8_lossy(&faults.stdout);
    assert_eq!(faults.status.code(), Some(0), "silent faults: {stdout}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(campaign.join("faults.json")).unwrap()).unwrap();
    let all = report["faults"].as_array().unwrap().clone();
    assert!(all.len() >= 6, "{report:#}");
    for f in &all {
        let (outcome, detail) = (
            f["outcome"].as_str().unwrap(),
            f["detail"].as_str().unwrap(),
        );
        assert!(
            ["detected", "masked", "corrected"].contains(&outcome),
            "{f:#}"
        );
        if outcome == "detected" {
            assert!(
                detail.contains("Invalid exchange") || detail.contains("ZIL-PMEM: pool pool:"),
                "{f:#}"
            );
        }
    }
    all
}

/// A crash before the next txg sync, recovered by replay from PM alone: `zpool freeze`
/// (ziltest's tool) keeps every later txg off the disk, then one process makes nine calls,
/// each logged as a different record type (mkdir, create, write, setattr for truncate,
/// rename, symlink, link, xattr, remove), each judged on its own (`fs-ops calls`). Every
/// call is durable once it returns, so each crash image, imported (claim) and mounted
/// (replay), shows exactly the calls that returned, in order: no violation, and the last
/// interval's final state has them all.
#[test]
fn zil_pmem_replays_every_logged_call_after_a_crash_before_txg_sync() {
    let Some(config) =
        zfs_pmem_ready("zil_pmem_replays_every_logged_call_after_a_crash_before_txg_sync")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("replay");
    let test = data("zil-pmem-replay.toml");
    let run = run_on_vm(&config, test.to_str().unwrap(), &out, &[]);
    let r = report(&out);
    assert_eq!(run.status.code(), Some(0), "{r}");
    let checkpoints = r["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 9, "{r}");
    let dump = last_final_state(&out, checkpoints.last().unwrap());
    assert_eq!(dump["/mnt/d/g"]["size"], 8192, "{dump}");
    assert_eq!(dump["/mnt/d/h"]["size"], 1000, "{dump}");
    assert_eq!(dump["/mnt/d/s"]["type"], "symlink", "{dump}");
    assert!(
        dump.get("/mnt/f").is_none() && dump.get("/mnt/d/l").is_none(),
        "{dump}"
    );
    let (entries, blocks) = zil_pmem_writes(&out.join("trace.ptrace"));
    assert!(
        entries >= 9,
        "{entries} ZIL-PMEM entry headers written to PM"
    );
    assert_eq!(blocks, 0, "a stock ZIL block was written");
}

/// Zeroed pages, zeroed 64-byte ranges and 8 scribbled bytes in the PM log of the replay
/// run (tests/data/zil-pmem-replay.toml), from its first entry header to the end mark after
/// its last entry (`persim faults --range`): none silent. A zeroed header slot, the chunk's
/// first or the end mark after the last entry, is damage, not the log's end (an end mark
/// written with each entry tells them apart): the mount is refused and the kernel log says
/// why. Without the end mark, a zeroed header shortens the log as a crash does: silent.
#[test]
fn zil_pmem_reports_every_zeroed_or_scribbled_header_of_its_log() {
    let Some(config) =
        zfs_pmem_ready("zil_pmem_reports_every_zeroed_or_scribbled_header_of_its_log")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("replay");
    let test = data("zil-pmem-replay.toml");
    let run = run_on_vm(&config, test.to_str().unwrap(), &out, &[]);
    assert_eq!(run.status.code(), Some(0), "{}", report(&out));
    let entries = zil_pmem_entries(&out.join("trace.ptrace"));
    let first = entries.iter().map(|e| e.0).min().expect("entries on PM");
    let (last, header, _) = entries.iter().max_by_key(|e| e.0).unwrap();
    let end = last + u64::from_le_bytes(header[48..56].try_into().unwrap()) + 256;
    let range = format!("{first:#x}:{:#x}", end - first);
    let all = zil_pmem_faults(
        dir.path(),
        &out,
        &config,
        &[
            "--kind",
            "page,zero:64,scribble:8",
            "--where",
            "written",
            "--range",
            &range,
            "--count",
            "3",
        ],
    );
    assert!(all.iter().any(|f| f["outcome"] == "detected"), "{all:#?}");
}

/// A crash during replay resumes it (tests/data/zil-pmem-replay-crash.toml): calls logged to
/// PM alone on a frozen pool, which is exported; then the traced run is the import and mount
/// that claim and replay them, its txgs reaching the disk and its chunks freed on PM. Every
/// crash image of that run, imported and mounted again, resumes from the replayed sequence
/// number the disk holds, so all of them give the whole replay's state, each call applied
/// once: `g2` keeps the renamed file's 8 KiB and `g` the 100 bytes written after (a rename
/// replayed twice would move the new `g` onto `g2`).
#[test]
fn zil_pmem_a_crash_during_replay_resumes_it() {
    if zfs_pmem_ready("zil_pmem_a_crash_during_replay_resumes_it").is_none() {
        return;
    }
    let config = data("zfs-pmem-unmounted.toml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("replay");
    let test = data("zil-pmem-replay-crash.toml");
    let run = run_on_vm(&config, test.to_str().unwrap(), &out, &[]);
    let r = report(&out);
    assert_eq!(run.status.code(), Some(0), "{r}");
    let interval = &r["checkpoints"][0];
    let images: usize = (interval["states"].as_array().unwrap().iter())
        .map(|s| s["images"].as_array().unwrap().len())
        .sum();
    assert!(images >= 10, "{images} crash images: {interval}");
    let dump = last_final_state(&out, interval);
    assert_eq!(dump["/mnt/d/g2"]["size"], 8192, "{dump}");
    assert_eq!(dump["/mnt/d/g"]["size"], 100, "{dump}");
    assert_eq!(dump["/mnt/d/h"]["size"], 1000, "{dump}");
    assert!(dump.get("/mnt/d/l").is_none(), "{dump}");
}

/// zil-pmem-dump's reader (`persim_zil_pmem::openzfs`) predicts the kernel's replay of
/// every crash image: on a frozen pool (tests/data/zil-pmem-dump.toml), each image's
/// region, scanned as the import scans it, with the txg from the NVMe image's uberblocks,
/// gives as many entries replayed (and not) as the kernel's replay line in that image's
/// state, and "no replay" exactly where the reader finds no entry to replay.
#[test]
fn zil_pmem_dump_predicts_the_kernels_replay_of_every_crash_image() {
    let Some(config) =
        zfs_pmem_ready("zil_pmem_dump_predicts_the_kernels_replay_of_every_crash_image")
    else {
        return;
    };
    use persim_zil_pmem::openzfs::{last_synced_txg, PoolLog};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let test = data("zil-pmem-dump.toml");
    let strategy = ["--strategy", "program-order"];
    let run = run_on_vm(&config, test.to_str().unwrap(), &out, &strategy);
    assert_eq!(run.status.code(), Some(0), "{}", report(&out));
    let images = dir.path().join("images");
    let trace = out.join("trace.ptrace");
    let (trace, images_arg) = (trace.to_str().unwrap(), images.to_str().unwrap());
    let made = persim(&[
        "images",
        trace,
        strategy[0],
        strategy[1],
        "--out",
        images_arg,
    ]);
    assert!(made.status.success(), "{made:?}");
    let blk_len = std::fs::metadata(out.join("trace.ptrace.blk-initial"))
        .unwrap()
        .len() as usize;
    let (mut checked, mut replaying) = (0, 0);
    for state in std::fs::read_dir(out.join("states")).unwrap() {
        let path = state.unwrap().path();
        let saved: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(saved["outcome"], "state", "{}: {saved}", path.display());
        let dump = saved["dump"].as_str().unwrap();
        let kernel = kernel_replay_counts(dump);
        let hash = path.file_stem().unwrap().to_str().unwrap();
        let image = std::fs::read(images.join(format!("{hash}.img"))).unwrap();
        let (pm, blk) = image.split_at(image.len() - blk_len);
        let synced = last_synced_txg(blk).expect("an intact uberblock");
        let predicted: Vec<(usize, usize)> = (PoolLog::find(pm).unwrap().predict(synced))
            .iter()
            .map(|r| (r.replayed.len(), r.lost.len()))
            .collect();
        assert_eq!(predicted, kernel, "image {hash}: kernel said {dump:?}");
        checked += 1;
        replaying += usize::from(!kernel.is_empty());
    }
    assert!(
        checked >= 3 && replaying >= 2,
        "{checked} images, {replaying} replaying"
    );
}

/// The (replayed, not replayed) counts of each ZIL-PMEM replay line in `text` ("N entries
/// replayed from PM, M not replayed").
fn kernel_replay_counts(text: &str) -> Vec<(usize, usize)> {
    let number = |s: &str| s.trim().parse::<usize>().unwrap();
    (text.lines())
        .filter_map(|l| l.split_once(" entries replayed from PM, "))
        .map(|(n, rest)| (number(n), number(rest.trim_end_matches(" not replayed"))))
        .collect()
}

/// A clone in a frozen pool (tests/data/zil-pmem-clone.toml): `cp --reflink=always` (FICLONE)
/// is logged as a TX_CLONE_RANGE entry on PM carrying the source's block pointers, never a
/// stock ZIL block, and replayed from PM: the clone has the source's bytes, and still after
/// the source's removal is replayed too. The claim at import holds a BRT reference on the
/// block until the log is freed: with the source kept, one reference is left (128 KiB
/// saved); a claim that took none would leave none once the log is freed, and a log freed
/// without dropping it two.
#[test]
fn zil_pmem_replays_a_clone_from_pm_its_blocks_held_until_replay() {
    if zfs_pmem_ready("zil_pmem_replays_a_clone_from_pm_its_blocks_held_until_replay").is_none() {
        return;
    }
    let config = data("zfs-pmem-reflink.toml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("clone");
    let test = data("zil-pmem-clone.toml");
    let run = run_on_vm(&config, test.to_str().unwrap(), &out, &[]);
    let r = report(&out);
    assert_eq!(run.status.code(), Some(0), "{r}");
    let checkpoints = r["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 2, "{r}");
    let cloned = last_final_state(&out, &checkpoints[0]);
    let md5 = cloned["f"].as_str().unwrap();
    assert_eq!(md5.len(), 32, "{cloned}");
    assert_eq!(cloned["g"], md5, "{cloned}");
    assert_eq!(cloned["saved"], 131_072, "{cloned}");
    let removed = last_final_state(&out, &checkpoints[1]);
    assert_eq!(removed["f"], "", "{removed}");
    assert_eq!(removed["g"], md5, "{removed}");
    assert_eq!(removed["saved"], 0, "{removed}");
    const TX_CLONE_RANGE: u64 = 24;
    let trace = out.join("trace.ptrace");
    let clones = zil_pmem_entries(&trace)
        .iter()
        .filter(|(_, _, body)| u64::from_le_bytes(body[..8].try_into().unwrap()) == TX_CLONE_RANGE)
        .count();
    assert_eq!(clones, 1, "TX_CLONE_RANGE entries on PM");
    assert_eq!(
        zil_pmem_writes(&trace).1,
        0,
        "a stock ZIL block was written"
    );
}

/// The one final state of a checkpoint interval of a run in `out`: its dump (or `state`
/// command's output) as JSON.
fn last_final_state(out: &Path, interval: &Value) -> Value {
    let finals = interval["final_states"].as_array().unwrap();
    assert_eq!(finals.len(), 1, "{interval}");
    let state = interval["states"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == finals[0])
        .unwrap();
    let image = state["images"][0].as_str().unwrap();
    let saved: Value = serde_json::from_slice(
        &std::fs::read(out.join("states").join(format!("{image}.json"))).unwrap(),
    )
    .unwrap();
    serde_json::from_str(saved["dump"].as_str().unwrap()).unwrap()
}

/// ZIL-PMEM logs a zvol's writes too: on a frozen pool (no txg after the setup reaches the
/// disk), three 4 KiB writes to the zvol, each synchronous (sync=always), are each durable
/// when they return in every crash image, through replay from PM when the import creates
/// the zvol's device; the last interval's final state has block 1 overwritten twice and
/// block 2 once. The writes were entries on PM, never a stock ZIL block.
#[test]
fn zil_pmem_replays_synchronous_zvol_writes_after_a_crash_before_txg_sync() {
    let Some(config) =
        zfs_pmem_ready("zil_pmem_replays_synchronous_zvol_writes_after_a_crash_before_txg_sync")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("zvol");
    let test = data("zil-pmem-zvol.toml");
    let run = run_on_vm(&config, test.to_str().unwrap(), &out, &[]);
    let r = report(&out);
    assert_eq!(run.status.code(), Some(0), "{r}");
    let checkpoints = r["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 3, "{r}");
    let blocks = |i: usize| {
        let state = last_final_state(&out, &checkpoints[i]);
        (0..4)
            .map(|b| state[b.to_string()].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(blocks(0), ["0", "A", "0", "0"]);
    assert_eq!(blocks(2), ["0", "C", "B", "0"]);
    let (entries, stock) = zil_pmem_writes(&out.join("trace.ptrace"));
    assert!(
        entries >= 3,
        "{entries} ZIL-PMEM entry headers written to PM"
    );
    assert_eq!(stock, 0, "a stock ZIL block was written");
}

/// The kernel log says what ZIL-PMEM found at the first mount: the pool of vm/zfs-pmem.toml
/// has its log vdev's 126 MiB of PM mapped (128 less fsdax's 2 MiB pfn info), its region not
/// formatted yet; a pool asking for it with a file as its log vdev is told why it keeps the
/// stock ZIL and what to do.
#[test]
fn zil_pmem_maps_a_pmem_log_vdev_and_says_why_it_refuses_another() {
    let Some(path) =
        zfs_pmem_ready("zil_pmem_maps_a_pmem_log_vdev_and_says_why_it_refuses_another")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.ptrace");
    let cmd = "dmesg | grep 'ZIL-PMEM: pool pool: log vdev /dev/pmem0 is 126 MiB of PM at 0x' \
               | grep -q 'not formatted' && \
               truncate -s 64M /tmp/d /tmp/l && \
               zpool create -o cachefile=none -O mountpoint=/p2 p2 /tmp/d log /tmp/l && \
               zpool set org.persim:zil=pmem p2 && zfs unmount p2 && zfs mount p2 && \
               dmesg | grep -q 'ZIL-PMEM: pool p2 asks for it .* but its log vdev is not a single disk (/tmp/l, error 22)' && \
               zpool destroy p2";
    let traced = persim(&[
        "trace",
        "--vm",
        path.to_str().unwrap(),
        "--cmd",
        cmd,
        "-o",
        trace.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&traced.stderr);
    assert_eq!(traced.status.code(), Some(0), "{stderr}");
}

/// The guest's output of the damaged-log scenario on `config` (tests/data/zfs-pmem-unmounted.toml
/// or a mutant of it): on a frozen pool a file is created, written (4 KiB of `Q`) and a
/// directory made, each synchronous, then the pool is exported; one bit of the write's data is
/// flipped on /dev/pmem0. The import's mount must be refused (`MOUNTED-DAMAGED` otherwise);
/// then the log is abandoned with the property the kernel names, the dataset mounted and
/// what it holds printed (`ABANDONED a=<size> later=<0 or 1>`), and the pool imported again.
fn damaged_log_output(config: &Path, dir: &Path) -> (Option<i32>, String) {
    let trace = dir.join("t.ptrace");
    let import = "zpool import -N -d /dev -o cachefile=none pool";
    let cmd = format!(
        "zfs mount pool && fs-ops creat /mnt/base && sync && zpool freeze pool && \
         fs-ops creat /mnt/a && tr '\\0' Q </dev/zero | head -c 4096 >/tmp/q && \
         dd if=/tmp/q of=/mnt/a bs=4096 conv=notrunc status=none && fs-ops mkdir /mnt/later && \
         zpool export pool && \
         q=$(dd if=/dev/pmem0 bs=1M skip=4 count=16 status=none | od -A d -v -t x1 \
             | grep -m1 '51 51 51 51 51 51 51 51 51 51 51 51 51 51 51 51' | cut -d' ' -f1 | sed 's/^0*//') && \
         printf P | dd of=/dev/pmem0 bs=1 seek=$((4194304 + q + 8)) conv=notrunc,fsync status=none && \
         {import} && if zfs mount pool; then echo MOUNTED-DAMAGED; exit 1; fi; \
         zpool events | grep -o zil_pmem_damaged_log && \
         txg=$(dmesg | sed -n 's/.*zfs set org.persim:zil_abandon=\\([0-9]*\\) pool$/\\1/p') && \
         zfs set org.persim:zil_abandon=$txg pool && zfs mount pool && \
         echo \"ABANDONED a=$(wc -c </mnt/a) later=$(ls /mnt | grep -c later)\" && \
         zpool export pool && {import} && zfs mount pool && dmesg | grep ZIL-PMEM"
    );
    let traced = persim(&[
        "trace",
        "--vm",
        config.to_str().unwrap(),
        "--cmd",
        &cmd,
        "-o",
        trace.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&traced.stdout).into_owned()
        + &String::from_utf8_lossy(&traced.stderr);
    (traced.status.code(), out)
}

/// A bit flipped in a ZIL-PMEM entry leaves the user to decide ([`damaged_log_output`]): at
/// import the mount is refused and nothing replayed, the kernel log names the damaged entry
/// (and the later one depending on it) and the command that abandons the log, and `zpool
/// events` has the damaged-log event. Setting the property the kernel names mounts the
/// dataset with what precedes the damage (the file, empty) and not the later directory; the
/// next import finds the log gone.
#[test]
fn zil_pmem_keeps_a_damaged_log_until_the_user_abandons_it() {
    if zfs_pmem_ready("zil_pmem_keeps_a_damaged_log_until_the_user_abandons_it").is_none() {
        return;
    }
    let config = data("zfs-pmem-unmounted.toml");
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = damaged_log_output(&config, dir.path());
    assert_eq!(code, Some(0), "{out}");
    for expected in [
        "cannot mount 'pool'",
        "is not replayed: its checksum does not match",
        "2 entries of its log (or corrupt headers) cannot be replayed; the log is kept",
        "zil_pmem_damaged_log",
        "its log is abandoned (org.persim:zil_abandon=",
        "ABANDONED a=0 later=0",
        "formatted: 121 chunks of 1048576 bytes, 0 entries found",
    ] {
        assert!(out.contains(expected), "no {expected:?} in {out}");
    }
    assert_eq!(out.matches("cannot be replayed").count(), 1, "{out}");
}

/// A configuration in `dir` extending `base` with ZIL-PMEM's mutant build
/// (`build-kmods.sh --zfs-pmem-mutants`) and mutant `n` chosen by its module parameter; None
/// (skipped) when that build is absent.
fn zil_pmem_mutant(test: &str, base: &Path, n: u32, dir: &Path) -> Option<std::path::PathBuf> {
    zfs_pmem_ready(test)?;
    let config = persim_vm::VmConfig::load(base).unwrap();
    let how = "build ZIL-PMEM's mutants with `scripts/build-kmods.sh --zfs-pmem-mutants` \
               (docs/design/zil-pmem.md)";
    let zfs = persim_vm::testing::optional_kmod_ready(test, &config, "zfs-pmem-mutants/zfs", how)?;
    let modules = zfs.parent().unwrap().to_str().unwrap();
    let path = dir.join(format!("zfs-pmem-mutant-{n}.toml"));
    std::fs::write(
        &path,
        format!(
            "extends = {:?}\nname = \"zfs-pmem-mutant-{n}\"\nkernel_args = \"zfs.zil_pmem_mutant={n}\"\n\
             modules = [\"nfit\", \"nd_pmem\", \"nvme\", \"{modules}/spl.ko\", \"{modules}/zfs.ko\"]\n",
            base.with_extension("").to_str().unwrap(),
        ),
    )
    .unwrap();
    Some(path)
}

/// The fence between an entry's body and its header (tests/data/zil-pmem-fence.toml: one
/// mkdir on a frozen pool, `single-line`: each dirty line alone lost or alone persisted):
/// with it every crash image recovers to before or after the call. Mutant 1, without it,
/// leaves images whose header is durable and a line of the body not, which replay refuses as
/// damage: the mount fails (`Invalid exchange`), a violation; and the log's rule, checked on
/// the trace (docs/design/model.md, "ZIL-PMEM log"), is reported broken.
#[test]
fn zil_pmem_fences_the_body_before_the_header_and_mutant_1_is_caught() {
    let test = "zil_pmem_fences_the_body_before_the_header_and_mutant_1_is_caught";
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(real) = zfs_pmem_ready(test) else {
        return;
    };
    let fence = data("zil-pmem-fence.toml");
    let dir = tempfile::tempdir().unwrap();
    let single_line = ["--strategy", "single-line"];
    let run = |config: &Path, out: &Path| {
        let code = run_on_vm(config, fence.to_str().unwrap(), out, &single_line);
        (code.status.code(), report(out))
    };
    let (code, r) = run(&real, &dir.path().join("real"));
    assert_eq!(code, Some(0), "{r}");
    assert!(r.get("journal_violations").is_none(), "{r}");
    let Some(mutant) = zil_pmem_mutant(test, &root.join("vm/zfs-pmem.toml"), 1, dir.path()) else {
        return;
    };
    let (code, r) = run(&mutant, &dir.path().join("mutant"));
    assert_eq!(code, Some(1), "{r}");
    // the log's rule, checked on the trace, names the header stored before its body
    let rules = r["journal_violations"].as_array().unwrap();
    assert!(
        rules
            .iter()
            .any(|v| v.as_str().unwrap().contains("ZIL-PMEM log rule broken")),
        "{r}"
    );
    let interval = &r["checkpoints"][0];
    let errors = interval["errors"].as_array().unwrap();
    assert!(
        errors.iter().any(|e| e["outcome"] == "recovery-error"
            && e["output"].as_str().unwrap().contains("Invalid exchange")),
        "{interval}"
    );
}

/// Mutant 2, no body checksum check at replay: the flipped bit of the damaged-log scenario
/// is replayed and the dataset mounted.
#[test]
fn zil_pmem_mutant_without_the_checksum_check_at_replay_is_caught() {
    let test = "zil_pmem_mutant_without_the_checksum_check_at_replay_is_caught";
    let base = data("zfs-pmem-unmounted.toml");
    let dir = tempfile::tempdir().unwrap();
    let Some(config) = zil_pmem_mutant(test, &base, 2, dir.path()) else {
        return;
    };
    let (code, out) = damaged_log_output(&config, dir.path());
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("MOUNTED-DAMAGED"), "{out}");
}

/// Mutant 3, replay that ignores dependencies: in the damaged-log scenario the directory
/// made after the damaged write is replayed once the log is abandoned, and the check counts
/// one entry lost instead of two.
#[test]
fn zil_pmem_mutant_replaying_without_dependencies_is_caught() {
    let test = "zil_pmem_mutant_replaying_without_dependencies_is_caught";
    let base = data("zfs-pmem-unmounted.toml");
    let dir = tempfile::tempdir().unwrap();
    let Some(config) = zil_pmem_mutant(test, &base, 3, dir.path()) else {
        return;
    };
    let (code, out) = damaged_log_output(&config, dir.path());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ABANDONED a=0 later=1"), "{out}");
    assert!(out.contains("1 entries of its log"), "{out}");
}

/// The most loads from PM of any byte of a synchronous 4 KiB write's ZIL-PMEM entry (its
/// data, 4 KiB of `Q`), traced with `--reads` on `config` through the write, an export and
/// the import and mount that replay it on a frozen pool.
fn most_loads_of_a_logged_byte(config: &Path, dir: &Path) -> usize {
    let trace = dir.join("r.ptrace");
    let cmd = "zfs mount pool && fs-ops creat /mnt/base && sync && zpool freeze pool && \
               fs-ops creat /mnt/a && tr '\\0' Q </dev/zero | head -c 4096 >/tmp/q && \
               dd if=/tmp/q of=/mnt/a bs=4096 conv=notrunc status=none && zpool export pool && \
               zpool import -N -d /dev -o cachefile=none pool && zfs mount pool && \
               cmp /tmp/q /mnt/a";
    let traced = persim(&[
        "trace",
        "--vm",
        config.to_str().unwrap(),
        "--reads",
        "--cmd",
        cmd,
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(traced.status.code(), Some(0), "{traced:?}");
    let (_, entries) = persim_trace::read_all(&trace).unwrap();
    let mut loads = std::collections::HashMap::new();
    for e in &entries {
        if let persim_trace::Op::Write { addr, data, .. } = &e.op {
            if data.len() >= 8 && data.iter().all(|&b| b == b'Q') {
                loads.extend((*addr..addr + data.len() as u64).map(|a| (a, 0)));
            }
        }
    }
    assert!(loads.len() >= 4096, "{} bytes of Q stored", loads.len());
    for e in &entries {
        if let persim_trace::Op::Read { addr, size } = e.op {
            for a in addr..addr + size {
                if let Some(n) = loads.get_mut(&a) {
                    *n += 1;
                }
            }
        }
    }
    loads.into_values().max().unwrap()
}

/// Time of check vs time of use, black-box from the trace's loads: ZIL-PMEM copies an
/// entry out of PM and checks and uses only the copy, once at claim, once when the mount
/// checks the log and once when it replays it, so no byte of the entry is loaded from PM
/// more than three times. Mutant 4 checks the entry in PM and applies the record from PM,
/// loading its bytes again after the check, where a flip would be applied unseen.
#[test]
fn zil_pmem_applies_the_copy_it_verified_and_mutant_4_does_not() {
    let test = "zil_pmem_applies_the_copy_it_verified_and_mutant_4_does_not";
    let base = data("zfs-pmem-unmounted.toml");
    if zfs_pmem_ready(test).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let real = most_loads_of_a_logged_byte(&base, dir.path());
    assert!((1..=3).contains(&real), "{real} loads");
    let Some(config) = zil_pmem_mutant(test, &base, 4, dir.path()) else {
        return;
    };
    let mutant = most_loads_of_a_logged_byte(&config, dir.path());
    assert!(mutant > 3, "{mutant} loads");
}

/// One extraction guest recovers several zfs-slog images in turn: between them the pool is
/// exported (extract/pmem.sh), or the next image's `blockdev --rereadpt` finds the disk
/// busy and every image after the first is a recovery error.
#[test]
fn on_zfs_one_guest_recovers_every_image_of_a_test() {
    let Some(path) = zfs_slog_ready("on_zfs_one_guest_recovers_every_image_of_a_test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = run_on_vm(&path, "append", &out, &["-j", "1"]);
    let r = report(&out);
    assert_eq!(run.status.code(), Some(0), "{r}");
    let interval = &r["checkpoints"][0];
    assert_eq!(interval["errors"], serde_json::json!([]), "{interval}");
    let states = interval["states"].as_array().unwrap();
    assert!(states.len() >= 2, "{interval}");
    assert!(states.iter().all(|s| s["outcome"] == "state"), "{interval}");
}

#[test]
fn profile_by_process_gives_each_of_two_concurrent_writers_its_bytes() {
    if !vm_ready("profile_by_process_gives_each_of_two_concurrent_writers_its_bytes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("two.ptrace");
    let t = trace.to_str().unwrap();
    // Two writers at once on ext4-DAX: 64 KiB by dd, 16 KiB by head (each new block is
    // zeroed by the pmem driver in the writer's context too: up to twice the data).
    let cmd = "dd if=/dev/zero of=/mnt/a bs=4096 count=16 2>/dev/null & \
               head -c 16384 /dev/zero > /mnt/b & wait";
    let traced = persim(&["trace", "--fs", "ext4", "--cmd", cmd, "-o", t]);
    assert_eq!(
        traced.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&traced.stderr)
    );
    let out = persim(&["profile", t, "--by", "process", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["threads_recorded"], true);
    let groups = a["groups"].as_array().unwrap();
    let bytes = |name: &str| {
        let g = groups
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no process {name} in {groups:?}"));
        assert!(g["pid"].as_u64().unwrap() > 1, "{g}");
        g["bytes_cached"].as_u64().unwrap() + g["bytes_nt"].as_u64().unwrap()
    };
    let (dd, head) = (bytes("dd"), bytes("head"));
    assert!((65536..=2 * 65536).contains(&dd), "dd stored {dd} bytes");
    assert!(
        (16384..=2 * 16384).contains(&head),
        "head stored {head} bytes"
    );
    assert!(
        groups.iter().all(|g| g["name"] != "unknown"),
        "every entry has a thread: {groups:?}"
    );
    // Each writer's first entry names it, as text too.
    let text = persim(&["trace", "print", t]);
    let text = String::from_utf8_lossy(&text.stdout);
    for name in ["comm=dd", "comm=head", "comm=hypercall"] {
        assert!(text.contains(name), "no {name} in the printed trace");
    }
}

/// PMDK's rules (docs/design/analysis.md) on a real libpmemobj program traced with
/// `--trace-calls pmdk --reads`: each bug of the `buggy` mode is flagged by its rule, once,
/// at its function (the two-thread one needs the trace's thread ids, the allocation one
/// the calls' return entries, the free one the freed object's size that the tracer reads
/// from libpmemobj's allocation header: the record was made in the untraced `init`), and
/// the `correct` mode, the same functions done right, has no finding of them (the
/// library's own stores are not judged).
#[test]
fn pmdk_rules_flag_each_bug_at_its_function_and_nothing_in_the_correct_program() {
    if !vm_ready("pmdk_rules_flag_each_bug_at_its_function_and_nothing_in_the_correct_program") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = root.join("examples/pmdk-rules/vm.toml");
    let dir = tempfile::tempdir().unwrap();
    let analyze = |mode: &str| {
        let trace = dir.path().join(format!("{mode}.ptrace"));
        let traced = persim(&[
            "trace",
            "--vm",
            config.to_str().unwrap(),
            "--setup",
            "pmdk-rules /mnt/pool init && sync",
            "--cmd",
            &format!("pmdk-rules /mnt/pool {mode}"),
            "--stack-traces",
            "--reads",
            "--trace-calls",
            "pmdk",
            "-o",
            trace.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&traced.stderr);
        assert_eq!(traced.status.code(), Some(0), "{stderr}");
        assert!(!stderr.contains("records no threads"), "{stderr}");
        let fail_on = RULES.map(|(kind, _)| kind).join(",");
        let out = persim(&["analyze", trace.to_str().unwrap(), "--fail-on", &fail_on]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    const RULES: [(&str, &str); 6] = [
        ("tx-unlogged-store", "tx_update+"),
        ("flush-not-pm", "persist_stack+"),
        ("persist-short", "persist_short+"),
        ("tx-uninitialised-alloc", "new_record+"),
        ("use-after-free", "drop_record+"),
        ("tx-overlapping-add", "add_total+"),
    ];
    let count = |text: &str, kind: &str| -> Option<u64> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(kind))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let (code, text) = analyze("buggy");
    assert_eq!(code, Some(1), "{text}");
    for (kind, function) in RULES {
        assert_eq!(count(&text, kind), Some(1), "{kind}:\n{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{kind} at pc=")) && l.contains(function)),
            "no {kind} at {function}:\n{text}"
        );
    }
    assert!(
        text.contains("add pmemobj_tx_add_range for 8 bytes at pool+"),
        "{text}"
    );
    let (code, text) = analyze("correct");
    assert_eq!(code, Some(0), "{text}");
}

/// The recovered state of image `hash` of a run whose test has its own state command.
fn state_json(run: &Path, hash: &str) -> Value {
    let recovered: Value =
        serde_json::from_slice(&std::fs::read(run.join(format!("states/{hash}.json"))).unwrap())
            .unwrap();
    serde_json::from_str(recovered["dump"].as_str().unwrap()).unwrap()
}

/// ZIL-PMEM's key-value consumer across media (vm/zil-pmem.toml, docs/design/zil-pmem.md): the
/// log in a MAP_SYNC file on PM, the store on the NVMe SSD. Recovery replays four logged
/// puts, committing each to the disk with its resume point; a crash at any of its disk
/// flushes and PM fences leaves images that all recover to the same map, the four puts
/// with their values, and the replay's commits are disk writes of the trace.
/// (`program-order` keeps it short; docs/results/results.md has the suite under `global-prefix`.)
#[test]
fn zil_pmem_recovery_of_logged_puts_gives_one_map_whatever_the_crash() {
    let test = "zil_pmem_recovery_of_logged_puts_gives_one_map_whatever_the_crash";
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/zil-pmem.toml");
    if persim_vm::testing::vm_ready(test, &persim_vm::VmConfig::load(&config).unwrap()).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = run_on_vm(
        &config,
        "zil-pmem/replay",
        &out,
        &["--strategy", "program-order"],
    );
    let r = report(&out);
    assert_eq!(run.status.code(), Some(0), "{r}");
    let interval = &r["checkpoints"][0];
    let states = interval["states"].as_array().unwrap();
    assert_eq!(
        states.len(),
        1,
        "one map from every crash image: {interval}"
    );
    let images = states[0]["images"].as_array().unwrap();
    assert!(images.len() > 1, "crashes inside the replay: {interval}");
    let map = &state_json(&out, images[0].as_str().unwrap())["map"];
    let puts: Vec<(&str, &str)> = map
        .as_object()
        .unwrap()
        .iter()
        .map(|(key, value)| (key.as_str(), &value["head"].as_str().unwrap()[..4]))
        .collect();
    assert_eq!(
        puts,
        [
            ("put-0001", "AAAA"),
            ("put-0002", "BBBB"),
            ("put-0003", "CCCC"),
            ("put-0004", "DDDD")
        ],
        "{map}"
    );
    // Each replayed put is a commit record (ZILKVTXG) written to the disk and flushed.
    let (_, entries) = persim_trace::read_all(&out.join("trace.ptrace")).unwrap();
    let commits = entries
        .iter()
        .filter(|e| matches!(&e.op, persim_trace::Op::BlkWrite { data, .. } if data.starts_with(b"ZILKVTXG")))
        .count();
    assert!(commits >= 4, "{commits} commit records written to the disk");
}
