//! OpenZFS's own test suite (Debian's zfs-test 2.3.2) in the guest: its tests of the intent
//! log, once against the stock ZIL and once against ZIL-PMEM (docs/design/zfs-slog.md,
//! "OpenZFS's test suite"). Ignored, as under TCG each test takes minutes; it needs the
//! test root scripts/setup.sh builds and the modules of `build-kmods.sh --zfs-pmem`:
//!
//! ```sh
//! cargo test --release -p persim-vm --test zfs_test_suite -- --ignored --nocapture
//! ```
//!
//! `ZFS_TESTS=slog_001_pos,zvol_misc_zil` runs only those. Each result is printed and
//! appended to target/zfs-tests/<zil>.log (with the test's log when it did not pass and,
//! for ZIL-PMEM, the kernel's ZIL-PMEM lines) as it finishes.

use persim_vm::{prepare, QemuSpec, Vm, VmConfig};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

const ROOT: &str = "/var/lib/persim/zfs/tests/root.tar";
const BOOT_TIMEOUT: Duration = Duration::from_secs(900);
/// zfs-tests.sh gives a single test 600 s (then `KILLED`), too few under TCG on a loaded
/// host (`slog_006_pos` was killed at load 28): the guest's copy gives it this many.
const SUITE_TEST_TIMEOUT_S: u64 = 1800;
/// Setup and cleanup come on top of the suite's timeout.
const TEST_TIMEOUT: Duration = Duration::from_secs(SUITE_TEST_TIMEOUT_S + 600);

/// What `zpool create` gives a pool under ZIL-PMEM (scripts/zfs-tests-zpool.sh).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Give {
    /// The property only: the test is about log vdevs (files, mirrors, several), which
    /// ZIL-PMEM refuses, so the kernel keeps the stock ZIL and says why.
    Property,
    /// /dev/pmem0 as the one log vdev, then the property: the test is about what the log
    /// holds and replays.
    PmemLog,
}

/// The suite's tests that touch the intent log: the `slog` group (`replay` is part of it
/// in 2.3.2), and each other test that freezes a pool to replay its log or reads the
/// ZIL's statistics; those of what the log holds first.
const TESTS: &[(&str, Give)] = &[
    ("slog_replay_fs_001", Give::PmemLog),
    ("slog_replay_fs_002", Give::PmemLog),
    ("slog_replay_volume", Give::PmemLog),
    ("suid_write_zil_replay", Give::PmemLog),
    ("zvol_misc_zil", Give::PmemLog),
    ("block_cloning_replay", Give::PmemLog),
    ("block_cloning_replay_encrypted", Give::PmemLog),
    ("longname_003_pos", Give::PmemLog),
    ("slog_001_pos", Give::Property),
    ("slog_002_pos", Give::Property),
    ("slog_003_pos", Give::Property),
    ("slog_004_pos", Give::Property),
    ("slog_005_pos", Give::Property),
    ("slog_006_pos", Give::Property),
    ("slog_007_pos", Give::Property),
    ("slog_008_neg", Give::Property),
    ("slog_009_neg", Give::Property),
    ("slog_010_neg", Give::Property),
    ("slog_011_neg", Give::Property),
    ("slog_012_neg", Give::Property),
    ("slog_013_pos", Give::Property),
    ("slog_014_pos", Give::Property),
    ("slog_015_neg", Give::Property),
    ("slog_016_pos", Give::Property),
    ("zilstat_001_pos", Give::Property),
];

/// The verdicts of the run in docs/design/zfs-slog.md (test, stock ZIL, ZIL-PMEM): a test
/// whose verdict changes fails this suite, so a ZIL-PMEM change that breaks a replay shows.
const EXPECTED: &[(&str, &str, &str)] = &[
    ("slog_replay_fs_001", "FAIL", "FAIL"),
    ("slog_replay_fs_002", "PASS", "PASS"),
    ("slog_replay_volume", "FAIL", "FAIL"),
    ("suid_write_zil_replay", "PASS", "PASS"),
    ("zvol_misc_zil", "PASS", "PASS"),
    ("block_cloning_replay", "PASS", "PASS"),
    ("block_cloning_replay_encrypted", "PASS", "PASS"),
    ("longname_003_pos", "FAIL", "FAIL"),
    ("slog_001_pos", "PASS", "PASS"),
    ("slog_002_pos", "PASS", "PASS"),
    ("slog_003_pos", "PASS", "PASS"),
    ("slog_004_pos", "PASS", "PASS"),
    ("slog_005_pos", "PASS", "PASS"),
];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Zil {
    Stock,
    Pmem,
}

#[test]
#[ignore = "hours under TCG: run with --ignored (see the module's comment)"]
fn openzfs_zil_tests_on_the_stock_zil() {
    run_suite(Zil::Stock);
}

#[test]
#[ignore = "hours under TCG: run with --ignored (see the module's comment)"]
fn openzfs_zil_tests_on_zil_pmem() {
    run_suite(Zil::Pmem);
}

fn run_suite(zil: Zil) {
    let test = format!("openzfs_zil_tests_on_{zil:?}");
    let config =
        VmConfig::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/zfs-tests.toml"))
            .unwrap();
    let Some(artifacts) = persim_vm::testing::vm_ready(&test, &config) else {
        return;
    };
    let how = "build them with `scripts/build-kmods.sh --zfs-pmem` (docs/design/zil-pmem.md)";
    if persim_vm::testing::optional_kmod_ready(&test, &config, "zfs-pmem/zfs", how).is_none() {
        return;
    }
    if !Path::new(ROOT).is_file() {
        persim_vm::testing::skip(
            &test,
            &format!("{ROOT} not found: build it with PERSIM_ZFS=1 bash scripts/setup.sh"),
        );
        return;
    }
    let only = std::env::var("ZFS_TESTS").ok();
    let tests: Vec<(&str, Give)> = TESTS
        .iter()
        .filter(|(name, _)| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == *name))
        })
        .copied()
        .collect();
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/zfs-tests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out_dir.join(format!("{zil:?}.log").to_lowercase()))
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("persim-cache");
    let prepared = prepare(&config, &artifacts, &cache).unwrap();
    let spec = QemuSpec {
        cpus: 2,
        ..prepared.qemu_spec(&config, work.path().join("pm.img"))
    };
    let mut vm = None;
    let mut results = BTreeMap::new();
    for (name, give) in tests {
        if vm.is_none() {
            vm = Some(boot(&spec, config.pm_size()));
        }
        let guest = vm.as_mut().unwrap();
        let mode = match (zil, give) {
            (Zil::Stock, _) => None,
            (Zil::Pmem, Give::Property) => Some("property"),
            (Zil::Pmem, Give::PmemLog) => Some("pmem-log"),
        };
        let (mut result, detail) = match guest.run(&test_script(name, mode), TEST_TIMEOUT) {
            Ok(out) => (result_of(name, &out.output), out.output),
            // The guest is unusable after an oops or a hang: the next test boots another.
            Err(e) => {
                vm = None;
                ("GUEST-ERROR".to_owned(), e.to_string())
            }
        };
        // A pass under ZIL-PMEM is one of ZIL-PMEM: the kernel says so when the pool closes
        // (a failed test's callback clears the kernel log, so only a pass is checked).
        if mode == Some("pmem-log") && result == "PASS" && !detail.contains("entries written to PM")
        {
            result = format!("{result}, ZIL-PMEM NOT USED");
        }
        eprintln!("{zil:?} {name}: {result}");
        writeln!(log, "=== {zil:?} {name}: {result}\n{detail}").unwrap();
        results.insert(name, result);
    }
    if let Some(vm) = vm {
        let _ = vm.shutdown(Duration::from_secs(120));
    }
    writeln!(log, "=== {zil:?} summary: {results:?}").unwrap();
    // Every test must have run to a verdict of the suite's own runner.
    let broken: Vec<_> = results
        .iter()
        .filter(|(_, r)| !["PASS", "FAIL", "SKIP", "KILLED"].contains(&r.as_str()))
        .collect();
    assert!(broken.is_empty(), "tests without a verdict: {broken:?}");
    let changed: Vec<_> = EXPECTED
        .iter()
        .filter_map(|&(name, stock, pmem)| {
            let want = if zil == Zil::Stock { stock } else { pmem };
            let got = results.get(name)?;
            (got != want).then(|| format!("{name}: {got}, was {want}"))
        })
        .collect();
    assert!(changed.is_empty(), "verdicts changed: {changed:?}");
}

/// A guest with the test root unpacked at /zt, entered by chroot, udev running in it
/// (zvols' /dev/zvol links), the vdevs' directory a tmpfs. The kernel opens file vdevs and
/// writes the pool cache file from its own threads, whose root is the guest's, not the
/// chroot: /var/tmp and /etc/zfs are the same directories in both.
fn boot(spec: &QemuSpec, pm_size: u64) -> Vm {
    std::fs::File::create(&spec.pm_file)
        .unwrap()
        .set_len(pm_size)
        .unwrap();
    let mut vm = Vm::boot(spec, BOOT_TIMEOUT).unwrap();
    let setup = format!(
        "set -e
        mkdir -p /zt && tar -xf /bin/root.tar -C /zt && rm /bin/root.tar
        sed -i 's/^timeout = 600$/timeout = {SUITE_TEST_TIMEOUT_S}/' /zt/usr/share/zfs/zfs-tests.sh
        grep -q '^timeout = {SUITE_TEST_TIMEOUT_S}$' /zt/usr/share/zfs/zfs-tests.sh
        for d in dev proc sys; do mount --bind /$d /zt/$d; done
        mkdir -p /zt/dev/shm /zt/etc/persim
        mkdir -p /var/tmp && mount -t tmpfs -o size=1200m,mode=1777 tmpfs /var/tmp
        mount --bind /var/tmp /zt/var/tmp
        mount -t tmpfs -o mode=1777 tmpfs /zt/tmp
        mount -t tmpfs tmpfs /zt/run
        mount -t tmpfs tmpfs /zt/dev/shm
        chmod u+s /zt/usr/bin/sudo
        mkdir -p /etc/zfs && mount --bind /zt/etc/zfs /etc/zfs
        chroot /zt /usr/lib/systemd/systemd-udevd --daemon
        chroot /zt /usr/local/bin/udevadm trigger --action=add
        chroot /zt /usr/local/bin/udevadm settle --timeout=120
        chroot /zt /usr/bin/setpriv --reuid=1000 --regid=1000 --clear-groups sudo -n id -un"
    );
    let out = vm.run(&setup, BOOT_TIMEOUT).unwrap();
    assert_eq!(out.exit_code, 0, "setting up the test root: {}", out.output);
    vm
}

/// Runs suite test `name` as the user `ztest` with file vdevs, with `mode` for the
/// zpool wrapper (None: the stock ZIL); prints zfs-tests.sh's output, the test's own log
/// when it did not pass, and the kernel's ZIL-PMEM lines; leaves no pool behind.
fn test_script(name: &str, mode: Option<&str>) -> String {
    let set_mode = match mode {
        Some(m) => format!("echo {m} >/zt/etc/persim/zil-pmem"),
        None => "rm -f /zt/etc/persim/zil-pmem".to_owned(),
    };
    format!(
        "{set_mode}
        dmesg -c >/dev/null
        chroot /zt /usr/bin/setpriv --reuid=1000 --regid=1000 --clear-groups env -i HOME=/home/ztest \
            USER=ztest LOGNAME=ztest PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin \
            /usr/share/zfs/zfs-tests.sh -f -t {name} 2>&1 | grep -v '^$'
        r=$(ls -td /zt/var/tmp/test_results/*/ 2>/dev/null | head -n1)
        if [ -n \"$r\" ] && ! grep -q '{name}.* \\[PASS\\]' \"$r/log\" 2>/dev/null; then
            f=$(find \"$r\" -path '*{name}*' -name merged | head -n1)
            [ -n \"$f\" ] && echo '--- test log (first errors)' && \
                grep -m 8 -B 3 -E '^(ERROR|FAIL|UNSUPPORTED|UNRESOLVED|ABORTED):' \"$f\"
        fi
        echo '--- kernel: ZIL-PMEM'
        dmesg | grep -E 'ZIL-PMEM|zfs-tests-zpool' | sort -u | head -n 20
        rm -rf /zt/var/tmp/test_results
        for p in $(chroot /zt /usr/sbin/zpool list -H -o name 2>/dev/null); do
            chroot /zt /usr/sbin/zpool destroy -f $p
        done
        true"
    )
}

/// zfs-tests.sh's verdict on test `name`: its `Test: …/name.ksh (run as …) [time] [PASS]`.
fn result_of(name: &str, output: &str) -> String {
    output
        .lines()
        .filter(|l| l.starts_with("Test: ") && l.contains(&format!("/{name}.ksh")))
        .filter_map(|l| {
            l.trim_end()
                .rsplit_once('[')
                .map(|(_, r)| r.trim_end_matches(']'))
        })
        .next_back()
        .unwrap_or("NO-VERDICT")
        .to_owned()
}

#[test]
fn a_verdict_is_the_test_runners_last_bracket() {
    let out = "Test: /usr/share/zfs/zfs-tests/tests/functional/slog/setup (run as root) [00:00] [PASS]\n\
               Test: /usr/share/zfs/zfs-tests/tests/functional/slog/slog_replay_fs_001.ksh (run as root) [01:02] [FAIL]\n";
    assert_eq!(result_of("slog_replay_fs_001", out), "FAIL");
    assert_eq!(result_of("slog_001_pos", out), "NO-VERDICT");
}
