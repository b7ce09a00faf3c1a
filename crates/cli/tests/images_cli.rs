//! The `persim images` and `persim trace` command-line contract, run as a user would.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn persim() -> Command {
    Command::cargo_bin("persim").unwrap()
}

fn json(args: &[&str]) -> Value {
    let out = persim().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn json_output_follows_the_contract_and_hashes_match_contents() {
    let trace = example("nt-mixed.trace");
    let v = json(&["images", trace.to_str().unwrap(), "--json", "--hex"]);
    let points = v["failure_points"].as_array().unwrap();
    let summary: Vec<(u64, &str, usize, bool)> = points
        .iter()
        .map(|p| {
            (
                p["index"].as_u64().unwrap(),
                p["kind"].as_str().unwrap(),
                p["images"].as_array().unwrap().len(),
                p["incomplete"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, vec![(3, "fence", 6, false), (4, "end", 2, false)]);
    assert!(points.iter().all(|p| p["checkpoint"].is_null()));
    let images = v["images"].as_object().unwrap();
    assert_eq!(
        images.len(),
        6,
        "the end's two images also arise at the fence"
    );
    for (hash, image) in images {
        let bytes = hex_decode(image["hex"].as_str().unwrap());
        assert_eq!(bytes.len(), 0x100, "the PM size from the trace header");
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), hash);
    }
}

#[test]
fn options_change_the_model() {
    let trace = example("nt-mixed.trace");
    let t = trace.to_str().unwrap();
    let count = |v: &Value| v["failure_points"][0]["images"].as_array().unwrap().len();
    assert_eq!(
        count(&json(&["images", t, "--json", "--cache", "persistent"])),
        5
    );
    let capped = json(&["images", t, "--json", "--max-images", "3"]);
    assert!(capped["failure_points"][0]["incomplete"].as_bool().unwrap());
    assert!(count(&capped) <= 3);
    let po = json(&["images", t, "--json", "--strategy", "program-order"]);
    assert_eq!(count(&po), 2, "nothing and everything");
    // the header's PM size can be overridden
    let big = json(&["images", t, "--json", "--hex", "--pm-size", "0x200"]);
    let first = big["images"].as_object().unwrap().values().next().unwrap();
    assert_eq!(first["hex"].as_str().unwrap().len(), 0x400);
}

#[test]
fn a_sampled_global_prefix_point_says_how_many_images_it_stands_for() {
    let trace = example("nt-mixed.trace");
    let args = [
        "images",
        trace.to_str().unwrap(),
        "--strategy",
        "global-prefix",
        "--max-images",
        "3",
    ];
    let v = json(&[&args[..], &["--json"]].concat());
    assert_eq!(v["failure_points"][0]["incomplete"], true);
    assert_eq!(
        v["failure_points"][0]["space"], 6,
        "the fence's images uncapped"
    );
    assert_eq!(v["failure_points"][1]["space"], 2);
    let out = persim().args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(sampled from 6: more than --max-images)"),
        "{text}"
    );
    assert!(text.contains("the strategy chooses 8 images"), "{text}");
}

#[test]
fn initial_contents_and_hash_level() {
    let dir = tempfile::tempdir().unwrap();
    let initial = dir.path().join("initial.img");
    std::fs::write(&initial, [0x5a; 0x100]).unwrap();
    let trace = example("nt-mixed.trace");
    let t = trace.to_str().unwrap();
    let v = json(&[
        "images",
        t,
        "--json",
        "--hex",
        "--initial",
        initial.to_str().unwrap(),
    ]);
    let end = v["failure_points"][1]["images"][0].as_str().unwrap();
    let bytes = hex_decode(v["images"][end]["hex"].as_str().unwrap());
    assert_eq!(&bytes[0..8], &[0xaa; 8], "A is durable after the fence");
    assert!(
        bytes[0x48..].iter().all(|&b| b == 0x5a),
        "untouched bytes keep the initial contents"
    );
    // the memo level changes how hashes are computed, never what they are
    let plain = json(&["images", t, "--json"]);
    assert_eq!(json(&["images", t, "--json", "--hash-level", "0"]), plain);
    let err = persim()
        .args(["images", t, "--hash-level", "99"])
        .output()
        .unwrap();
    assert_eq!(err.status.code(), Some(2));
}

#[test]
fn store_holds_each_image_once_and_a_rerun_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("images");
    let trace = example("journal-missing-fence.trace");
    let args = [
        "images",
        trace.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    let first = json(&args);
    let index = || -> Value {
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap()
    };
    let before = index();
    for (hash, record) in before.as_object().unwrap() {
        let bytes = std::fs::read(out.join(format!("{hash}.img"))).unwrap();
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), hash);
        assert!(!record["origins"].as_array().unwrap().is_empty());
    }
    assert_eq!(
        before.as_object().unwrap().len(),
        first["images"].as_object().unwrap().len()
    );
    let second = json(&args);
    assert_eq!(first, second);
    assert_eq!(index(), before, "re-running must not duplicate origins");
}

#[test]
fn pack_then_print_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let packed = dir.path().join("journal.ptrace");
    let trace = example("journal.trace");
    persim()
        .args([
            "trace",
            "pack",
            trace.to_str().unwrap(),
            "-o",
            packed.to_str().unwrap(),
        ])
        .assert()
        .success();
    let print = |p: &Path| {
        persim()
            .args(["trace", "print", p.to_str().unwrap()])
            .output()
            .unwrap()
            .stdout
    };
    let text = print(&trace);
    assert_eq!(print(&packed), text);
    assert!(String::from_utf8_lossy(&text).contains("fence sfence"));
    // the binary trace gives the same images as the text one
    let images = |p: &Path| json(&["images", p.to_str().unwrap(), "--json"]);
    assert_eq!(images(&packed), images(&trace));
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn from_checkpoint_keeps_exactly_the_later_failure_points() {
    let trace = example("journal.trace");
    let trace = trace.to_str().unwrap();
    let all = json(&["images", trace, "--json"]);
    let later = json(&["images", trace, "--json", "--from-checkpoint", "2"]);
    let expected: Vec<&Value> = all["failure_points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["checkpoint"].as_u64().is_some_and(|c| c >= 2))
        .collect();
    let kept: Vec<&Value> = later["failure_points"].as_array().unwrap().iter().collect();
    assert!(!kept.is_empty() && kept.len() < all["failure_points"].as_array().unwrap().len());
    assert_eq!(kept, expected);
    let kept_images: Vec<&String> = later["images"].as_object().unwrap().keys().collect();
    assert!(kept
        .iter()
        .flat_map(|p| p["images"].as_array().unwrap())
        .all(|h| kept_images.contains(&&h.as_str().unwrap().to_string())));
}

/// A reader that goes away (`persim … | head -1`) ends the output normally: exit code 0,
/// no panic, nothing on stderr; a closed stderr does not turn an error into a panic.
/// A trace recorded with an NVMe disk has two initial images beside it: crash images are
/// PM followed by the disk, each part starting from its own initial contents.
#[test]
fn a_recorded_disk_is_the_block_part_of_every_image() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let new_block = "bb".repeat(512);
    std::fs::write(
        &trace,
        format!(
            "# persim-trace pm-size=0x1000 blk-size=0x400\nwrite 0x0 01\nblkwrite 0x200 {new_block}\nblkflush\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("t.trace.initial"), [7u8; 0x1000]).unwrap();
    std::fs::write(dir.path().join("t.trace.blk-initial"), [0xaau8; 0x400]).unwrap();
    let v = json(&["images", trace.to_str().unwrap(), "--json", "--hex"]);
    let images: Vec<Vec<u8>> = v["images"]
        .as_object()
        .unwrap()
        .values()
        .map(|i| hex_decode(i["hex"].as_str().unwrap()))
        .collect();
    let mut everything = vec![7u8; 0x1000];
    everything[0] = 1;
    everything.extend([0xaa; 0x200]);
    everything.extend([0xbb; 0x200]);
    assert!(
        images.contains(&everything),
        "PM written, then the disk's blocks"
    );
    assert!(images.iter().all(|i| i[0x1000..0x1200] == [0xaa; 0x200]));

    // A disk image of the wrong size is refused, naming it.
    std::fs::write(dir.path().join("t.trace.blk-initial"), [0u8; 16]).unwrap();
    let out = persim()
        .args(["images", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("t.trace.blk-initial has 16 bytes, but the block device has 1024 bytes"),
        "{err}"
    );
}

/// `persim images ARGS` in a child limited to `limit` bytes of address space (so that a
/// generation that would exhaust memory fails fast instead of straining the machine):
/// its exit status, its standard error and its peak resident memory in bytes.
fn images_within(args: &[&str], limit: u64, dir: &Path) -> (libc::c_int, String, u64) {
    use std::os::unix::process::CommandExt;
    let stderr = dir.join("stderr");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_persim"));
    command
        .arg("images")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap());
    // SAFETY: setrlimit is async-signal-safe; the closure allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &rlimit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    // Waited for with wait4 below, which also gives the peak memory.
    let pid = command.spawn().unwrap().id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child just spawned (std's Child is not waited on after this).
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    };
    let peak = u64::try_from(usage.ru_maxrss).unwrap() * 1024;
    (code, std::fs::read_to_string(stderr).unwrap(), peak)
}

#[test]
fn a_cap_that_cannot_fit_in_memory_is_refused_with_what_fits() {
    // 1000 lines dirty at one fence: global-prefix has far more than a million images there.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("many-lines.trace");
    let mut text = String::from("# persim-trace pm-size=0x100000\n");
    for i in 0..1000 {
        text += &format!("write {:#x} 01\n", 0x40 * i);
    }
    text += "fence sfence\n";
    std::fs::write(&trace, text).unwrap();
    let trace = trace.to_str().unwrap();
    for cap in ["100000000", "10000000"] {
        let args = ["--strategy", "global-prefix", "--max-images", cap, trace];
        let (code, stderr, peak) = images_within(&args, 4 << 30, dir.path());
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains(&format!("--max-images {cap} does not fit in memory"))
                && stderr.contains("give --max-images"),
            "{stderr}"
        );
        // Generous: the refusal comes before the images are chosen.
        assert!(peak < 512 << 20, "peak RSS {} MiB", peak >> 20);
    }
}
