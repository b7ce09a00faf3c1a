//! `persim efficiency run` end to end with the real fio on two real file systems: a tmpfs
//! and ext4 on a loop device (a directory of the test's file system where the test may
//! not mount). Runs are 1 s long: the figures are not checked, their presence is.

use assert_cmd::Command;
use persim_vm::testing::Tmpfs;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// An ext4 file system in a file, mounted through a loop device; unmounted when dropped.
struct LoopExt4(PathBuf);

impl LoopExt4 {
    fn mount(test: &str, dir: &Path) -> Option<LoopExt4> {
        let image = dir.with_extension("img");
        std::fs::create_dir_all(dir).unwrap();
        let file = std::fs::File::create(&image).unwrap();
        file.set_len(64 << 20).unwrap();
        let run = |cmd: &str, args: &[&str]| {
            std::process::Command::new(cmd)
                .args(args)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        let (image_s, dir_s) = (image.to_str().unwrap(), dir.to_str().unwrap());
        if run("mkfs.ext4", &["-q", "-F", image_s]) && run("mount", &["-o", "loop", image_s, dir_s])
        {
            return Some(LoopExt4(dir.to_owned()));
        }
        eprintln!("{test}: cannot mount ext4 on a loop device; measuring a directory instead");
        None
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

fn fio_installed(test: &str) -> bool {
    let ok = std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: fio is missing (scripts/setup.sh installs it)"
        );
        persim_vm::testing::skip(test, "fio is not installed (apt-get install fio)");
    }
    ok
}

/// A short series' arguments: 1 s runs without ramp, 4 MiB files per job.
fn short_series(targets: &[String], out: &Path) -> Vec<String> {
    let mut args: Vec<String> = ["efficiency", "run"].map(String::from).into();
    args.extend(targets.iter().cloned());
    for a in [
        "--jobs",
        "1..2",
        "--power",
        "none",
        "--idle-seconds",
        "1",
        // other tests and builds share the machine: the quiet check would refuse
        "--allow-noise",
        "--fio-option",
        "runtime=1",
        "--fio-option",
        "ramp_time=0",
        "--fio-option",
        "size=4M",
        "--json",
        "--out",
    ] {
        args.push(a.into());
    }
    args.push(out.to_str().unwrap().into());
    args
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lost+found")
        .collect();
    names.sort();
    names
}

#[test]
fn a_series_on_tmpfs_and_ext4_measures_every_point_resumes_and_leaves_no_files() {
    let test = "a_series_on_tmpfs_and_ext4";
    if !fio_installed(test) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(_tmpfs) = Tmpfs::mount(test, &tmp.path().join("tmpfs"), "64m") else {
        return;
    };
    let ext4_dir = tmp.path().join("ext4");
    let ext4 = LoopExt4::mount(test, &ext4_dir);
    let ext4_type = if ext4.is_some() { "ext4" } else { "" };
    let targets = vec![
        format!("{}:tmpfs", tmp.path().join("tmpfs").display()),
        if ext4_type.is_empty() {
            ext4_dir.display().to_string()
        } else {
            format!("{}:ext4", ext4_dir.display())
        },
    ];
    let out = tmp.path().join("out");
    let run = Command::cargo_bin("persim")
        .unwrap()
        .args(short_series(&targets, &out))
        .assert()
        .success();
    let results: Value = serde_json::from_slice(&run.get_output().stdout).unwrap();
    let points = results["points"].as_array().unwrap();
    let keys: Vec<(String, u64)> = points
        .iter()
        .map(|p| {
            (
                p["target"]["fs_type"].as_str().unwrap().to_owned(),
                p["jobs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(keys[..2], [("tmpfs".into(), 1), ("tmpfs".into(), 2)]);
    assert_eq!(keys.len(), 4);
    if !ext4_type.is_empty() {
        assert_eq!(keys[2..], [("ext4".into(), 1), ("ext4".into(), 2)]);
    }
    for p in points {
        assert!(p["fio"]["bytes_written"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(p["fio"]["jobs"], p["jobs"], "{p}");
        assert!(p["cpu_s_per_gib"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["joules_per_gib"].is_null(), "{p}");
    }
    assert_eq!(
        results["machine"]["fio_version"].as_str().unwrap().get(..4),
        Some("fio-")
    );
    assert!(!results["machine"]["kernel"].as_str().unwrap().is_empty());
    // no fio file left on either target
    assert!(entries(&tmp.path().join("tmpfs")).is_empty());
    assert!(entries(&ext4_dir).is_empty());
    assert_eq!(
        entries(&out),
        [
            "bandwidth.svg",
            "cpu-cost.svg",
            "points",
            "results.json",
            "results.txt",
            "series.json"
        ]
    );
    let text = std::fs::read_to_string(out.join("results.txt")).unwrap();
    assert!(text.contains("No energy figures"), "{text}");
    assert!(text.contains("fio-3"), "{text}");
    let svg = std::fs::read_to_string(out.join("cpu-cost.svg")).unwrap();
    assert!(svg.contains("tmpfs:"), "the plot has no line per target");

    // Run again: every point is kept from the first run, none measured again.
    let point = out
        .join("points")
        .read_dir()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let before = std::fs::read(&point).unwrap();
    // (with the results as an HTML page: the table and the plots inline)
    let page = tmp.path().join("series.html");
    let again = Command::cargo_bin("persim")
        .unwrap()
        .args(short_series(&targets, &out))
        .arg("--html")
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("fio-3") && html.contains("No energy figures"),
        "{html}"
    );
    assert_eq!(
        html.matches("<svg").count(),
        2,
        "bandwidth and CPU cost: {html}"
    );
    let stderr = String::from_utf8_lossy(&again.get_output().stderr).into_owned();
    assert_eq!(stderr.matches("done earlier, kept").count(), 4, "{stderr}");
    assert!(!stderr.contains("fio with"), "{stderr}");
    assert_eq!(std::fs::read(&point).unwrap(), before);
    let resumed: Value = serde_json::from_slice(&again.get_output().stdout).unwrap();
    assert_eq!(resumed["points"], results["points"]);

    // Other fio options in the same directory are refused, not mixed in.
    let mut other = short_series(&targets, &out);
    other.extend(["--fio-option".into(), "bs=4k".into()]);
    let refused = Command::cargo_bin("persim")
        .unwrap()
        .args(other)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(stderr.contains("other fio options"), "{stderr}");
    drop(ext4);
}

#[test]
fn ctrl_c_stops_fio_removes_its_files_and_keeps_no_half_point() {
    let test = "ctrl_c_stops_fio";
    if !fio_installed(test) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let out = tmp.path().join("out");
    let mut args = short_series(&[target.display().to_string()], &out);
    args.extend(["--fio-option".into(), "runtime=60".into()]);
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("persim"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // wait for fio's files in its directory on the target
    let deadline = Instant::now() + Duration::from_secs(60);
    let work = target.join(format!("persim-efficiency.{}", child.id()));
    while !work.is_dir() || entries(&work).is_empty() {
        assert!(Instant::now() < deadline, "fio never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: our own child, not yet waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        entries(&target).is_empty(),
        "fio's files are left: {:?}",
        entries(&target)
    );
    assert!(entries(&out.join("points")).is_empty());
}

#[test]
fn a_missing_fio_another_file_system_or_a_busy_system_is_refused_before_measuring() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let target = tmp.path().display().to_string();
    let mut args = short_series(std::slice::from_ref(&target), &out);
    args.extend(["--fio".into(), "/nonexistent/fio".into()]);
    let missing = Command::cargo_bin("persim")
        .unwrap()
        .args(args)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&missing.get_output().stderr).into_owned();
    assert!(stderr.contains("apt-get install fio"), "{stderr}");

    let wrong = format!("{target}:nosuchfs");
    let refused = Command::cargo_bin("persim")
        .unwrap()
        .args(short_series(&[wrong], &out))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    if !fio_installed("a_target_on_another_file_system") {
        return;
    }
    assert!(stderr.contains("not nosuchfs"), "{stderr}");
    assert!(!stderr.contains("fio with"), "{stderr}");

    // A system busier than the limit is refused with the figure (a negative limit makes
    // any system too busy), unless --allow-noise.
    let mut noisy: Vec<String> = short_series(std::slice::from_ref(&target), &out)
        .into_iter()
        .filter(|a| a != "--allow-noise")
        .collect();
    noisy.push("--quiet-limit=-1".into());
    let refused = Command::cargo_bin("persim")
        .unwrap()
        .args(noisy)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(
        stderr.contains("not quiet") && stderr.contains("--allow-noise"),
        "{stderr}"
    );
    assert!(!stderr.contains("fio with"), "{stderr}");
}

/// `efficiency run --vm --profile`, one small point: fio's 64 writes of 16 KiB (1 MiB) to
/// ext4-DAX in the guest, counted by the plugin's counting mode, the kernel's by function too.
#[test]
fn a_guest_point_on_ext4_dax_counts_instructions_and_pm_bytes_consistently() {
    let test = "a_guest_point_on_ext4_dax";
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/ext4-dax.toml");
    let vm = persim_vm::VmConfig::load(&config).unwrap();
    if !fio_installed(test) || persim_vm::testing::vm_ready(test, &vm).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let run = Command::cargo_bin("persim")
        .unwrap()
        .args(["efficiency", "run", "--profile", "--vm"])
        .arg(&config)
        .args(["--jobs", "1", "--fio-option", "size=1M", "--json", "--out"])
        .arg(&out)
        .assert()
        .success();
    let results: Value = serde_json::from_slice(&run.get_output().stdout).unwrap();
    // the JSON printed is the JSON saved
    let saved: Value =
        serde_json::from_slice(&std::fs::read(out.join("guest-results.json")).unwrap()).unwrap();
    assert_eq!(results, saved);
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{results}");
    let p = &points[0];
    let get = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {p}"));
    let (app, writes) = (get(&p["app_bytes"]), get(&p["fio"]["writes"]));
    assert_eq!(get(&p["fio"]["bytes_written"]), 1 << 20, "{p}");
    assert_eq!((app, writes), (1 << 20, 64), "{p}");
    let c = &p["counts"];
    let (kernel, user) = (get(&c["kernel_instructions"]), get(&c["user_instructions"]));
    let (pm, nvme) = (get(&c["pm_bytes_written"]), get(&c["nvme_bytes_written"]));
    // fio's start alone executes tens of millions of user instructions, and every
    // synchronous write enters the kernel, which stores the data and ext4's journal on PM
    assert!(user > 10_000_000, "user instructions: {p}");
    assert!(kernel > 10_000 * writes, "kernel instructions: {p}");
    assert!(pm >= app, "fewer PM bytes than fio wrote: {p}");
    assert!(pm < 16 * app, "PM bytes: {p}");
    assert_eq!(nvme, 0, "ext4-DAX has no SSD: {p}");
    // the derived figures are the counts'
    let gib = app as f64 / (1u64 << 30) as f64;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let figure = |key: &str| p[key].as_f64().unwrap();
    assert!(close(
        figure("kernel_instructions_per_gib") * gib,
        kernel as f64
    ));
    assert!(close(
        figure("user_instructions_per_gib") * gib,
        user as f64
    ));
    let per_write = figure("instructions_per_write");
    assert!(
        close(per_write * writes as f64, (kernel + user) as f64),
        "{p}"
    );
    assert!(close(figure("pm_amplification") * app as f64, pm as f64));
    // the profile's blocks add up to the kernel's count; its functions, most first, hold
    // DAX's copy to PM (non-temporal stores), and none costs more than the whole
    let counts = std::fs::read_to_string(out.join("guest-points/ext4-dax.jobs-1.counts")).unwrap();
    let counts = persim_abi::Counts::parse(&counts).unwrap();
    let blocks: u64 = counts.kernel_blocks.iter().map(|&(_, n)| n).sum();
    assert_eq!(blocks, kernel, "{counts:?}");
    let functions = p["kernel_functions"].as_array().unwrap();
    let costs: Vec<f64> = (functions.iter())
        .map(|f| f["instructions_per_write"].as_f64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] >= w[1]), "{functions:?}");
    assert!(costs.iter().sum::<f64>() <= kernel as f64 / writes as f64 * (1.0 + 1e-9));
    let names: Vec<&str> = functions
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    let copies_to_pm = |n: &&str| n.contains("flushcache") || n.contains("nocache");
    assert!(names.iter().any(copies_to_pm), "{names:?}");
    let profile = std::fs::read_to_string(out.join("guest-profile.txt")).unwrap();
    assert!(profile.contains(&format!("{} ", names[0])), "{profile}");
    // the table shows the same point, and both plots were drawn with its stack
    let text = std::fs::read_to_string(out.join("guest-results.txt")).unwrap();
    let row = text
        .lines()
        .find(|l| l.starts_with("ext4-dax "))
        .unwrap_or_else(|| panic!("no ext4-dax row: {text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..3], ["1", "1.0"], "{row}");
    assert_eq!(cells[5], format!("{per_write:.0}"), "{row}");
    assert_eq!(
        cells[6],
        format!("{:.2}", figure("pm_amplification")),
        "{row}"
    );
    for svg in ["guest-instructions.svg", "guest-write-amplification.svg"] {
        let svg = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(svg.contains("ext4-dax"), "no line for the stack: {svg}");
    }
}

/// `--icount` with two jobs: QEMU runs the two vCPUs in turn on one thread and shares its
/// translated blocks between them. With the plugin's per-vCPU inline counters there, the
/// guest's kernel failed its own crypto self-tests and panicked while booting (QEMU 10
/// compiles the translating vCPU's index into them); `serial=on` counts with callbacks.
#[test]
fn an_instruction_counting_guest_with_two_vcpus_boots_and_counts_both_jobs() {
    let test = "an_instruction_counting_guest_with_two_vcpus";
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm/ext4-dax.toml");
    let vm = persim_vm::VmConfig::load(&config).unwrap();
    if !fio_installed(test) || persim_vm::testing::vm_ready(test, &vm).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let run = Command::cargo_bin("persim")
        .unwrap()
        .args(["efficiency", "run", "--icount", "--vm"])
        .arg(&config)
        .args([
            "--jobs",
            "2",
            "--fio-option",
            "size=256k",
            "--json",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success();
    let results: Value = serde_json::from_slice(&run.get_output().stdout).unwrap();
    let p = &results["points"][0];
    let get = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {p}"));
    assert_eq!((get(&p["jobs"]), get(&p["cpus"])), (2, 2), "{p}");
    assert_eq!(p["icount"], true, "{p}");
    // both jobs wrote their 256 KiB, and the kernel ran for every write
    let (app, writes) = (get(&p["app_bytes"]), get(&p["fio"]["writes"]));
    assert_eq!((app, writes), (512 << 10, 32), "{p}");
    let c = &p["counts"];
    let (kernel, user) = (get(&c["kernel_instructions"]), get(&c["user_instructions"]));
    assert!(user > 10_000_000, "user instructions: {p}");
    assert!(kernel > 10_000 * writes, "kernel instructions: {p}");
    assert!(get(&c["pm_bytes_written"]) >= app, "{p}");
}

/// A loop device attached to a file; detached when dropped.
struct LoopDevice(String);

impl LoopDevice {
    fn attach(image: &Path) -> Option<LoopDevice> {
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(image)
            .output()
            .ok()?;
        let device = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !device.is_empty()).then_some(LoopDevice(device))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

/// The device `dir` is mounted from, as /proc/self/mounts says.
fn mount_source(dir: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let dir = dir.canonicalize().unwrap();
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| Path::new(f[1]) == dir)
        .map(|f| f[0].to_owned())
        .unwrap()
}

#[test]
fn a_raw_device_is_written_directly_and_a_mounted_one_is_refused() {
    let test = "a_raw_device_is_written_directly";
    if !fio_installed(test) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let image = tmp.path().join("raw.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let Some(device) = LoopDevice::attach(&image) else {
        persim_vm::testing::skip(test, "cannot attach a loop device (needs root)");
        return;
    };
    let out = tmp.path().join("out");
    let run = Command::cargo_bin("persim")
        .unwrap()
        .args(short_series(std::slice::from_ref(&device.0), &out))
        .assert()
        .success();
    let results: Value = serde_json::from_slice(&run.get_output().stdout).unwrap();
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{results}");
    for p in points {
        assert_eq!(p["target"]["label"], format!("raw:{}", device.0), "{p}");
        assert_eq!(p["target"]["raw"], true, "{p}");
        assert!(p["fio"]["bytes_written"].as_u64().unwrap() > 0, "{p}");
    }
    // fio wrote the device itself: the image is no longer all zeroes
    let data = std::fs::read(&image).unwrap();
    assert!(
        data.iter().any(|&b| b != 0),
        "nothing was written to the device"
    );

    // a device holding a mounted file system is refused before fio runs
    let Some(ext4) = LoopExt4::mount(test, &tmp.path().join("ext4")) else {
        return;
    };
    let mounted = mount_source(&ext4.0);
    let refused = Command::cargo_bin("persim")
        .unwrap()
        .args(short_series(
            std::slice::from_ref(&mounted),
            &tmp.path().join("out2"),
        ))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(stderr.contains("holds a mounted file system"), "{stderr}");
    assert!(!stderr.contains("fio with"), "{stderr}");
}

#[test]
fn a_numa_node_that_does_not_exist_is_refused_with_the_nodes_there_are() {
    let tmp = tempfile::tempdir().unwrap();
    let refused = Command::cargo_bin("persim")
        .unwrap()
        .args(["efficiency", "run"])
        .arg(tmp.path())
        .args(["--numa-node", "4095", "--out"])
        .arg(tmp.path().join("out"))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(
        stderr.contains("no NUMA node 4095; its nodes are"),
        "{stderr}"
    );
    assert!(!tmp.path().join("out").exists(), "{stderr}");
}
