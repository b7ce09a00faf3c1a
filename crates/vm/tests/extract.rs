//! State extraction with the real QEMU, kernel and fs-dump (scripts/setup.sh installs and
//! builds them). Without them the tests are skipped with a message, except under CI.

use persim_abi::{RECOVERY_EPOCH, SET_BY_RECOVERY};
use persim_state::Recovered;
use persim_vm::{
    default_config_dir, extract_states, prepare, Artifacts, DumpOptions, ExtractMode, Machine, Vm,
    VmConfig,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(120);
/// ext4's "needs recovery" feature flag (s_feature_incompat): set while mounted, cleared
/// by the journal replay at the next mount.
const EXT4_RECOVER: u32 = 0x4;

/// The artifacts, or None (with a printed reason) when the real VM cannot run here.
fn artifacts_or_skip(test: &str) -> Option<Artifacts> {
    persim_vm::testing::vm_ready(
        test,
        &VmConfig::for_fs(&default_config_dir(), "ext4").unwrap(),
    )
}

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("persim-cache")
}

fn config(fs: &str) -> VmConfig {
    VmConfig::for_fs(&default_config_dir(), fs).unwrap()
}

/// Runs `steps` in a guest on a fresh DAX file system `fs` and copies the PM backing file
/// after each step, while the file system is mounted: crash images whose recovery replays
/// the journal (log).
fn crash_images(fs: &str, artifacts: &Artifacts, dir: &Path, steps: &[&str]) -> Vec<PathBuf> {
    let config = config(fs);
    let prepared = prepare(&config, artifacts, &cache_dir()).unwrap();
    let pm = dir.join("pm.backing");
    std::fs::File::create(&pm)
        .unwrap()
        .set_len(config.pm_size())
        .unwrap();
    let spec = prepared.qemu_spec(&config, pm.clone());
    let mut vm = Vm::boot(&spec, TIMEOUT).unwrap();
    for command in [&config.mkfs, &config.mount] {
        let out = vm.run(command, TIMEOUT).unwrap();
        assert_eq!(out.exit_code, 0, "{command}: {}", out.output);
    }
    let images = steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let out = vm.run(step, TIMEOUT).unwrap();
            assert_eq!(out.exit_code, 0, "{step}: {}", out.output);
            let image = dir.join(format!("step{i}.img"));
            std::fs::copy(&pm, &image).unwrap();
            image
        })
        .collect();
    vm.shutdown(TIMEOUT).unwrap();
    images
}

/// An image of PM-sized pseudo-random bytes.
fn garbage_image(path: &Path, size: u64) -> PathBuf {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..size / 8)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect();
    std::fs::write(path, bytes).unwrap();
    path.to_owned()
}

fn zero_image(path: &Path, size: u64) -> PathBuf {
    std::fs::File::create(path).unwrap().set_len(size).unwrap();
    path.to_owned()
}

/// s_feature_incompat of the first ext4 superblock in the image (the file system starts
/// after the pfn info block, at a 4 KiB-aligned offset).
fn ext4_incompat(image: &[u8]) -> Option<u32> {
    (0..image.len() - 2048).step_by(4096).find_map(|start| {
        let sb = &image[start + 1024..start + 2048];
        (sb[0x38..0x3a] == [0x53, 0xef])
            .then(|| u32::from_le_bytes(sb[0x60..0x64].try_into().unwrap()))
    })
}

fn hash(path: &Path) -> blake3::Hash {
    blake3::hash(&std::fs::read(path).unwrap())
}

/// A machine of `fs` with `jobs` extraction workers, 60 s per image.
fn machine(fs: &str, artifacts: Artifacts, jobs: usize) -> Machine {
    Machine {
        config: config(fs),
        config_file: None,
        artifacts,
        timeout: Duration::from_secs(60),
        boot_timeout: TIMEOUT,
        cache_dir: cache_dir(),
        jobs,
        progress: false,
    }
}

/// fs-dump without times and lost+found.
fn fs_dump() -> DumpOptions {
    DumpOptions {
        ignore: ["atime", "ctime", "mtime"].map(str::to_owned).into(),
        exclude: vec!["lost+found".to_owned()],
        ..DumpOptions::default()
    }
}

/// Extracts and returns the results and the wall time per image; checks that each image's
/// result was reported once, as it is returned.
fn timed_extract(
    machine: &Machine,
    mode: ExtractMode,
    images: &[PathBuf],
) -> (Vec<Recovered>, f64) {
    let mut calls = Vec::new();
    let started = Instant::now();
    let dump = fs_dump();
    let states: Vec<Recovered> = extract_states(machine, mode, false, &dump, images, |i, e| {
        calls.push((i, e.state.clone()))
    })
    .unwrap()
    .into_iter()
    .map(|e| e.state)
    .collect();
    let per_image = started.elapsed().as_secs_f64() / images.len() as f64;
    assert_eq!(states.len(), images.len());
    calls.sort_by_key(|(i, _)| *i);
    let reported: Vec<(usize, Recovered)> = states.iter().cloned().enumerate().collect();
    assert_eq!(calls, reported, "one call per image, with its result");
    (states, per_image)
}

fn dump(state: &Recovered) -> &str {
    match state {
        Recovered::State { dump } => dump,
        other => panic!("expected a state, got {other:?}"),
    }
}

#[test]
fn a_reused_guest_gives_the_states_of_fresh_boots_and_images_stay_untouched() {
    let test = "a_reused_guest_gives_the_states_of_fresh_boots_and_images_stay_untouched";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let size = config("ext4").pm_size();
    let mut images = crash_images(
        "ext4",
        &artifacts,
        dir.path(),
        &[
            "echo one >/mnt/a && sync",
            "mkdir /mnt/d && echo two >/mnt/d/b && ln -s a /mnt/l && sync",
            "mv /mnt/a /mnt/d/c && rm /mnt/d/b && sync",
            "echo three >>/mnt/d/c && umount /mnt",
        ],
    );
    images.push(zero_image(&dir.path().join("zero.img"), size));
    images.push(garbage_image(&dir.path().join("garbage.img"), size));
    // The same image twice, and an earlier image after later ones: no state leaks
    // from one image into the next.
    images.push(images[0].clone());
    let before: Vec<_> = images.iter().map(|i| hash(i)).collect();
    let incompat = ext4_incompat(&std::fs::read(&images[0]).unwrap()).expect("ext4 superblock");
    assert_ne!(
        incompat & EXT4_RECOVER,
        0,
        "the image needs a journal replay"
    );

    let machine = machine("ext4", artifacts, 2);
    let (reused, reuse_time) = timed_extract(&machine, ExtractMode::ReuseGuest, &images);
    let (fresh, fresh_time) = timed_extract(&machine, ExtractMode::FreshBoot, &images);
    eprintln!(
        "{} images, 2 workers: reused guest {reuse_time:.2} s/image, fresh boot {fresh_time:.2} s/image",
        images.len()
    );

    assert_eq!(reused, fresh);
    let after: Vec<_> = images.iter().map(|i| hash(i)).collect();
    assert_eq!(before, after, "extraction must never modify an image file");

    let states: Vec<&str> = reused[..4].iter().map(dump).collect();
    assert!(
        states[0].contains("/a\"") && !states[0].contains("/d\""),
        "{}",
        states[0]
    );
    assert!(
        states[1].contains("/d/b\"") && states[1].contains("/l\""),
        "{}",
        states[1]
    );
    assert!(
        states[2].contains("/d/c\"") && !states[2].contains("/d/b\""),
        "{}",
        states[2]
    );
    assert_ne!(states[2], states[3], "appended bytes change the state");
    assert!(!states[0].contains("lost+found") && !states[0].contains("atime"));
    assert_eq!(reused[6], reused[0]);
    for (state, what) in [(&reused[4], "all-zero"), (&reused[5], "garbage")] {
        assert!(
            matches!(state, Recovered::RecoveryError { output } if output.contains("mount")),
            "{what} image: {state:?}"
        );
    }
}

/// With `reads`, each image's recovery is traced for loads: the journal replay of ext4
/// reads the superblock's magic; a failed mount keeps what it read; without `reads` there
/// is no read set; and tracing loads changes no state.
#[test]
fn reads_gives_the_lines_recovery_loaded_without_changing_states() {
    let test = "reads_gives_the_lines_recovery_loaded_without_changing_states";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let size = config("ext4").pm_size();
    let mut images = crash_images(
        "ext4",
        &artifacts,
        dir.path(),
        &["echo one >/mnt/a && sync"],
    );
    images.push(zero_image(&dir.path().join("zero.img"), size));
    let machine = machine("ext4", artifacts, 1);
    let extract = |reads: bool| {
        let started = Instant::now();
        let mode = ExtractMode::ReuseGuest;
        let extracted =
            extract_states(&machine, mode, reads, &fs_dump(), &images, |_, _| {}).unwrap();
        (extracted, started.elapsed().as_secs_f64())
    };
    let (traced, traced_time) = extract(true);
    let (plain, plain_time) = extract(false);
    eprintln!(
        "reads on: {traced_time:.1} s, off: {plain_time:.1} s for {} images",
        images.len()
    );
    let states = |e: &[persim_vm::Extracted]| e.iter().map(|e| e.state.clone()).collect::<Vec<_>>();
    assert_eq!(states(&traced), states(&plain));
    assert!(plain.iter().all(|e| e.words_read.is_none()));

    let image = std::fs::read(&images[0]).unwrap();
    let superblock = (0..image.len() - 2048)
        .step_by(4096)
        .find(|&start| image[start + 1024 + 0x38..start + 1024 + 0x3a] == [0x53, 0xef])
        .expect("an ext4 superblock") as u64
        + 1024;
    // s_magic's word: read of the image before the mount writes the superblock
    let words = traced[0].words_read.as_ref().expect("a read set");
    let magic = (superblock + 0x38) & !7;
    assert!(
        words.contains(&magic),
        "{} words, not the magic's",
        words.len()
    );
    assert!(words.windows(2).all(|w| w[0] < w[1] && w[1] % 8 == 0));
    assert!(traced[1].state.is_error(), "{:?}", traced[1].state);
    assert!(
        traced[1].words_read.is_some(),
        "a failed mount keeps its read set"
    );
}

#[test]
fn xfs_log_recovery_in_a_reused_guest_matches_fresh_boots() {
    let test = "xfs_log_recovery_in_a_reused_guest_matches_fresh_boots";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut images = crash_images(
        "xfs",
        &artifacts,
        dir.path(),
        &[
            "echo one >/mnt/a && sync",
            "mkdir /mnt/d && mv /mnt/a /mnt/d/a && sync",
        ],
    );
    images.push(images[0].clone());
    let before: Vec<_> = images.iter().map(|i| hash(i)).collect();
    let (reused, _) = timed_extract(
        &machine("xfs", artifacts.clone(), 1),
        ExtractMode::ReuseGuest,
        &images,
    );
    let (fresh, _) = timed_extract(
        &machine("xfs", artifacts, 2),
        ExtractMode::FreshBoot,
        &images,
    );
    assert_eq!(reused, fresh);
    assert!(dump(&reused[0]).contains("/a\""), "{:?}", reused[0]);
    assert!(dump(&reused[1]).contains("/d/a\""), "{:?}", reused[1]);
    assert_eq!(reused[2], reused[0]);
    let after: Vec<_> = images.iter().map(|i| hash(i)).collect();
    assert_eq!(before, after, "extraction must never modify an image file");
}

#[test]
fn crashes_and_hangs_are_results_and_the_worker_carries_on() {
    let test = "crashes_and_hangs_are_results_and_the_worker_carries_on";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let images = crash_images(
        "ext4",
        &artifacts,
        dir.path(),
        &[
            "echo ok >/mnt/f && sync",
            "touch /mnt/hang && sync",
            "rm /mnt/hang && touch /mnt/panic && sync",
        ],
    );
    let mut machine = machine("ext4", artifacts, 1);
    // A recovery that hangs or panics the kernel on the images marked for it.
    machine.config.recover = format!(
        "{} || exit\n[ -e /mnt/hang ] && sleep 600\n\
         [ -e /mnt/panic ] && echo c >/proc/sysrq-trigger\ntrue",
        machine.config.recover
    );
    machine.timeout = Duration::from_secs(10);
    let order = [0, 1, 0, 2, 0].map(|i| images[i].clone());
    let (states, _) = timed_extract(&machine, ExtractMode::ReuseGuest, &order);

    assert!(dump(&states[0]).contains("/f\""));
    assert!(
        matches!(&states[1], Recovered::Hang { output } if output.contains("no answer")),
        "{:?}",
        states[1]
    );
    assert!(
        matches!(&states[3], Recovered::GuestCrash { output } if output.contains("sysrq")),
        "{:?}",
        states[3]
    );
    // After a hang and after a panic the worker's next guest gives the same state.
    assert_eq!(states[2], states[0]);
    assert_eq!(states[4], states[0]);
}

#[test]
fn an_oops_in_recovery_is_a_crash_at_once_and_the_next_image_gets_a_fresh_guest() {
    let test = "an_oops_in_recovery_is_a_crash_at_once_and_the_next_image_gets_a_fresh_guest";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let Some(oops) = persim_vm::testing::kmod_ready(test, &config("ext4"), "oops") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let images = crash_images(
        "ext4",
        &artifacts,
        dir.path(),
        &["echo ok >/mnt/f && sync", "touch /mnt/oops && sync"],
    );
    let mut machine = machine("ext4", artifacts, 1);
    machine.config.modules.push(oops.display().to_string());
    // On the image marked for it, a real oops (targets/kmods/oops): the first write kills
    // its shell holding the module's mutex, the second blocks on it for good, as a mount
    // does after its file system oopsed with a lock held.
    machine.config.recover = format!(
        "{} || exit
if [ -e /mnt/oops ]; then
\
         sh -c 'echo 1 >/proc/persim-oops'
echo 1 >/proc/persim-oops
fi",
        machine.config.recover
    );
    machine.timeout = TIMEOUT;
    let order = [0, 1, 0].map(|i| images[i].clone());
    let mut finished = Vec::new();
    let started = Instant::now();
    let states: Vec<Recovered> = extract_states(
        &machine,
        ExtractMode::ReuseGuest,
        false,
        &fs_dump(),
        &order,
        |i, _| finished.push((i, started.elapsed())),
    )
    .unwrap()
    .into_iter()
    .map(|e| e.state)
    .collect();

    let Recovered::GuestCrash { output } = &states[1] else {
        panic!("an oops is a recovery crash, not {:?}", states[1]);
    };
    assert!(
        output.starts_with("kernel oops in persim_oops_dereference")
            && output.contains("BUG: kernel NULL pointer dereference")
            && output.contains("Oops: ")
            && output.contains("persim_oops_write")
            && !output.contains("RSP:"),
        "{output}"
    );
    // At once, not at the image's time limit.
    let oops_took = finished[1].1 - finished[0].1;
    assert!(oops_took < machine.timeout, "{finished:?}");
    // The next image is recovered on a fresh guest, as before the oops.
    assert!(dump(&states[0]).contains("/f\""), "{:?}", states[0]);
    assert_eq!(states[2], states[0]);
}

#[test]
fn timestamps_recovery_writes_are_marked_and_do_not_tell_images_apart() {
    let test = "timestamps_recovery_writes_are_marked_and_do_not_tell_images_apart";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let images = crash_images(
        "ext4",
        &artifacts,
        dir.path(),
        &[
            "echo a >/mnt/f && echo b >/mnt/g && sync",
            "echo c >/mnt/h && sync",
        ],
    );
    let mut machine = machine("ext4", artifacts, 1);
    // Recovery writes f's times; between the images the guest's clock moves on.
    machine.config.recover = format!("{} && touch /mnt/f && sleep 2", machine.config.recover);
    let options = DumpOptions {
        ignore: vec!["atime".to_owned()],
        exclude: vec!["lost+found".to_owned()],
        ..DumpOptions::default()
    };
    let order = [0, 1, 0].map(|i| images[i].clone());
    let states: Vec<serde_json::Value> = extract_states(
        &machine,
        ExtractMode::ReuseGuest,
        false,
        &options,
        &order,
        |_, _| {},
    )
    .unwrap()
    .iter()
    .map(|e| serde_json::from_str(dump(&e.state)).unwrap())
    .collect();
    let field = |state: &serde_json::Value, path: &str, name: &str| {
        let record = state
            .as_object()
            .unwrap()
            .iter()
            .find(|(p, _)| p.ends_with(path));
        record.unwrap_or_else(|| panic!("{path} in {state}")).1[name].clone()
    };
    for state in &states {
        assert_eq!(field(state, "/f", "mtime"), SET_BY_RECOVERY, "{state}");
        assert_eq!(field(state, "/f", "ctime"), SET_BY_RECOVERY, "{state}");
        // what the traced run wrote stays
        let mtime = field(state, "/g", "mtime");
        let seconds: i64 = mtime
            .as_str()
            .unwrap()
            .split('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(seconds < RECOVERY_EPOCH, "{state}");
    }
    assert_eq!(
        field(&states[0], "/f", "mtime"),
        field(&states[1], "/f", "mtime")
    );
    // The same image recovered later by the same guest: the same state.
    assert_eq!(states[2], states[0]);
}

/// The per-image time of both modes with one worker (docs/design/extraction.md):
/// `cargo test --release -p persim-vm --test extract -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: run it alone, with --release"]
fn measure_reused_guest_against_fresh_boot() {
    let Some(artifacts) = artifacts_or_skip("measure_reused_guest_against_fresh_boot") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let steps: Vec<String> = (0..6)
        .map(|i| {
            format!("mkdir /mnt/d{i} && echo {i} >/mnt/d{i}/f && mv /mnt/d{i}/f /mnt/g{i} && sync")
        })
        .collect();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let images = crash_images("ext4", &artifacts, dir.path(), &steps);
    let images: Vec<PathBuf> = images.iter().chain(&images).cloned().collect();

    let mut seconds = Vec::new();
    for mode in [ExtractMode::ReuseGuest, ExtractMode::FreshBoot] {
        // Steady state: from the first finished image to the last (the first one pays the
        // reused guest's boot).
        let mut finished = Vec::new();
        let started = Instant::now();
        let states = extract_states(
            &machine("ext4", artifacts.clone(), 1),
            mode,
            false,
            &fs_dump(),
            &images,
            |_, _| finished.push(started.elapsed().as_secs_f64()),
        )
        .unwrap();
        assert!(states.iter().all(|e| !e.state.is_error()), "{states:?}");
        let first = finished[0];
        let per_image = (finished[finished.len() - 1] - first) / (finished.len() - 1) as f64;
        eprintln!(
            "{mode:?}: {} images, first done after {first:.2} s, then {per_image:.2} s/image",
            images.len()
        );
        seconds.push(per_image);
    }
    assert!(
        seconds[0] * 3.0 < seconds[1],
        "reusing the guest must pay off: {seconds:?}"
    );
}
