//! Fault injection: each way a user's input or the machine can make Persim fail, driven
//! through the `persim` binary, asserting the exit code (2: the tool failed), a message that
//! names the cause, and that nothing is left behind: no half-written output, no orphan
//! files, no run directory for a run that never started. The VM cases are skipped with a
//! message where the VM cannot run, except under CI.

mod common;

use assert_cmd::Command;
use common::{persim, run_test_file, vm_ready};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn persim_command() -> Command {
    Command::cargo_bin("persim").unwrap()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_failing_operation_fails_the_test_with_the_guest_error() {
    if !vm_ready("a_failing_operation_fails_the_test_with_the_guest_error") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = run_test_file("failing-op.toml", &out, &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("operation 2 (`cat /nonexistent`) failed")
            && stderr.contains("nonexistent"),
        "{stderr}"
    );
    assert!(!out.join("report.json").exists() && !out.join("trace.ptrace").exists());
}

#[test]
fn a_hang_names_the_operation_and_leaves_no_partial_trace() {
    if !vm_ready("a_hang_names_the_operation_and_leaves_no_partial_trace") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = run_test_file("hanging-op.toml", &out, &["--timeout", "30"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the traced run stopped in operation 2 (`sleep 600`)")
            && stderr.contains("did not finish the traced run within 30 s"),
        "{stderr}"
    );
    // the plugin's unfinished trace and the initial image of a run that never ended
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("trace"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bad_traces_sizes_and_initial_images_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, text: &str, args: &[&str]| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = persim_command()
            .args(["images", path.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("no-size.trace", "write 0x0 01\nfence sfence\n", &[]);
    assert!(err.contains("--pm-size"), "{err}");
    let err = run(
        "corrupt.trace",
        "write 0x0 01\nfence sfence\nwrite 0x8 zz\n",
        &["--pm-size", "4K"],
    );
    assert!(err.contains("entry 2"), "{err}");
    let err = run(
        "outside.trace",
        "write 0xff8 0102030405060708090a\n",
        &["--pm-size", "4K"],
    );
    assert!(
        err.contains("outside.trace: entry 0: 10-byte access at 0xff8 is outside"),
        "{err}"
    );
    for size in ["0xffffffffffffffff", "16777216G"] {
        let err = run("huge.trace", "write 0x0 01\n", &["--pm-size", size]);
        assert!(err.contains("limit of 64 GiB"), "{err}");
    }
    let err = run(
        "huge-header.trace",
        "# persim-trace pm-size=0xffffffffffffffff\nwrite 0x0 01\n",
        &[],
    );
    assert!(err.contains("limit of 64 GiB"), "{err}");
    let short = dir.path().join("short.img");
    std::fs::write(&short, [0u8; 16]).unwrap();
    let err = run(
        "short-initial.trace",
        "write 0x0 01\n",
        &["--pm-size", "4K", "--initial", short.to_str().unwrap()],
    );
    assert!(err.contains("has 16 bytes, but PM has 4096 bytes"), "{err}");
}

#[test]
fn a_closed_pipe_is_a_normal_end() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("long.ptrace");
    let synth = persim_command()
        .args(["trace", "synth", "--entries", "200000", "-o"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(synth.status.success());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_persim"))
        .args(["images", "--strategy", "program-order"])
        .arg(&trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut closed_stderr = std::process::Command::new(env!("CARGO_BIN_EXE_persim"))
        .args(["images", "/nonexistent.trace"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(closed_stderr.stderr.take());
    assert_eq!(
        closed_stderr.wait().unwrap().code(),
        Some(2),
        "an error, not a panic"
    );
}

/// A generation that fails half-way (a corrupt entry) leaves valid JSON that names the
/// error, and a store whose index accounts for every image file in it.
#[test]
fn a_failed_generation_leaves_valid_json_and_no_orphan_images() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(example("journal-missing-fence.trace")).unwrap();
    text.push_str("write 0x0 zz\n");
    let trace = dir.path().join("corrupt.trace");
    std::fs::write(&trace, text).unwrap();
    let store = dir.path().join("store");
    let out = persim_command()
        .args(["images", "--json", "-q", "--out"])
        .arg(&store)
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["error"].as_str().unwrap().contains("entry 17"), "{v}");
    assert!(!v["failure_points"].as_array().unwrap().is_empty(), "{v}");
    let index: Value =
        serde_json::from_slice(&std::fs::read(store.join("index.json")).unwrap()).unwrap();
    let files: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|name| name.strip_suffix(".img").map(str::to_string))
        .collect();
    assert!(!files.is_empty());
    for hash in files {
        assert!(index.get(&hash).is_some(), "{hash}.img is not in the index");
    }
}

/// A test file with a typo in `ignore`, or a test name that is not in the suite, is
/// refused before any VM runs, with what is valid, and leaves no run directory.
#[test]
fn a_bad_test_is_refused_up_front_and_leaves_no_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.toml");
    std::fs::write(
        &typo,
        "description = \"x\"\nops = [\"echo a > /mnt/a\"]\nignore = [\"atimes\"]\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        typo.to_str().unwrap(),
        "--out",
        o,
    ]);
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    assert!(
        stderr(&run).contains("unknown fs-dump field `atimes` (fields: atime,"),
        "{run:?}"
    );
    assert!(!out.exists(), "a refused test left {}", out.display());
    let run = persim(&["run", "--fs", "ext4", "--test", "no-such-test", "--out", o]);
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    assert!(
        stderr(&run)
            .contains("no test `no-such-test`: give a test file, or one of the fs suite: append,"),
        "{run:?}"
    );
    assert!(!out.exists(), "a refused test left {}", out.display());
    for command in ["run", "suite"] {
        let mut args = vec![command, "--fs", "ext5", "--out", o];
        args.extend(match command {
            "run" => ["--test", "hello-world"].as_slice(),
            _ => ["fs"].as_slice(),
        });
        let refused = persim(&args);
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        assert!(stderr(&refused).contains("ext5"), "{refused:?}");
        assert!(
            !out.exists(),
            "a bad --fs of {command} left {}",
            out.display()
        );
    }
}

/// An `--out` that cannot be written is named before any VM runs.
#[test]
fn an_unwritable_out_is_named_before_any_work() {
    let run = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "hello-world",
        "--out",
        "/proc/self/x",
    ]);
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    assert!(
        stderr(&run).contains("cannot create /proc/self/x"),
        "{run:?}"
    );
}

/// `debug at` past the trace's end says how long the trace is instead of printing nothing.
#[test]
fn an_index_beyond_the_trace_is_an_error_that_gives_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    std::fs::write(
        &trace,
        "# persim-trace pm-size=0x1000\nwrite 0x0 01\nfence sfence\n",
    )
    .unwrap();
    let out = persim(&["debug", "at", trace.to_str().unwrap(), "--index", "7"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains("entry 7 is beyond the trace, which has 2 entries"),
        "{out:?}"
    );
}

/// The scratch files (PM and disk behind the guests, the plugin's links to the trace) of a
/// `persim` killed with SIGKILL, which gives it no chance to clean up, are removed by the
/// next run.
#[test]
fn scratch_files_of_a_killed_run_are_removed_by_the_next() {
    if !vm_ready("scratch_files_of_a_killed_run_are_removed_by_the_next") {
        return;
    }
    let cache = persim_vm::Machine::default_cache_dir();
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_persim"))
        .args([
            "run",
            "--fs",
            "ext4",
            "--test",
            "hello-world",
            "-q",
            "--out",
        ])
        .arg(dir.path().join("killed"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let prefix = format!("pm-{}-", child.id());
    let scratch_of_child = || -> Vec<PathBuf> {
        std::fs::read_dir(&cache)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().path())
                    .filter(|p| {
                        let name = p.file_name().unwrap().to_string_lossy();
                        name.starts_with(&prefix)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    // Killed once the tracing VM has its PM file and the plugin's links.
    let traced = |files: Vec<PathBuf>| {
        files
            .iter()
            .any(|p| p.extension() == Some("trace".as_ref()))
    };
    while !traced(scratch_of_child()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = scratch_of_child();
    assert!(
        traced(left.clone()) && left.iter().any(|p| p.extension() == Some("img".as_ref())),
        "the killed run made no scratch file in {}",
        cache.display()
    );
    let next = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "hello-world",
        "-q",
        "--out",
        dir.path().join("next").to_str().unwrap(),
    ]);
    assert_eq!(next.status.code(), Some(0), "{next:?}");
    let still = scratch_of_child();
    assert!(still.is_empty(), "left behind: {still:?}");
}

/// A run directory that holds a run of another test is refused before any work, with
/// `--force` named, and left as it was.
#[test]
fn a_run_directory_of_another_test_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let inputs = r#"{"persim": "0.1.0", "test": "hello-world", "machine": "ext4-dax",
        "strategy": "program-order", "cache": "volatile", "max_images": 4096,
        "nt_prefixes": "auto", "trace_key": "k", "images_key": "k", "states_key": "k"}"#;
    std::fs::write(run.join("inputs.json"), inputs).unwrap();
    std::fs::write(run.join("trace.ptrace"), "write 0x0 01\n").unwrap();
    let out = persim(&[
        "run",
        "--fs",
        "ext4",
        "--test",
        "rename-overwrite",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains("holds a run of test `hello-world` on ext4-dax")
            && stderr(&out).contains("pass --force"),
        "{out:?}"
    );
    let mut left: Vec<String> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    // and its lock file, which stays (docs/design/tester.md, "One process per directory")
    assert_eq!(left, ["inputs.json", "persim.lock", "trace.ptrace"]);
    assert_eq!(
        std::fs::read_to_string(run.join("inputs.json")).unwrap(),
        inputs
    );
}

/// `persim cache` lists the cache's own files and prunes those unused for the days given,
/// in $PERSIM_CACHE, leaving other files alone.
#[test]
fn the_cache_is_listed_and_pruned_by_last_use() {
    let dir = tempfile::tempdir().unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 86_400);
    for (name, used) in [
        ("booted-0123456789abcdef.qemu", old),
        ("initramfs-00ff.cpio", std::time::SystemTime::now()),
        ("mine.txt", old),
    ] {
        let file = std::fs::File::create(dir.path().join(name)).unwrap();
        file.set_len(2_000_000).unwrap();
        let times = std::fs::FileTimes::new()
            .set_accessed(used)
            .set_modified(used);
        file.set_times(times).unwrap();
    }
    let cache = |args: &[&str]| {
        Command::cargo_bin("persim")
            .unwrap()
            .arg("cache")
            .args(args)
            .env("PERSIM_CACHE", dir.path())
            .output()
            .unwrap()
    };
    let listed = cache(&[]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(text.contains("2 file(s), 4.0 MB in"), "{text}");
    assert!(text.contains("30 days unused  booted snapshot"), "{text}");
    let pruned = cache(&["--prune", "--older-than", "7"]);
    let text = String::from_utf8_lossy(&pruned.stdout);
    assert!(text.contains("1 file(s), 2.0 MB removed"), "{text}");
    assert!(!dir.path().join("booted-0123456789abcdef.qemu").exists());
    assert!(dir.path().join("initramfs-00ff.cpio").exists());
    assert!(dir.path().join("mine.txt").exists(), "not the cache's");
}
