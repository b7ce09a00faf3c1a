//! End-to-end tests with the real QEMU and Debian kernel (installed by scripts/setup.sh).
//! Without them they are skipped with a message, except under CI (CI set), where they must run.

use persim_vm::{default_config_dir, prepare, Artifacts, QemuSpec, Vm, VmConfig};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(120);

/// The artifacts, or None (with a printed reason) when the real VM cannot run here.
fn artifacts_or_skip(test: &str) -> Option<Artifacts> {
    let missing = if persim_vm::check_version().is_err() {
        Some("QEMU >= 10".to_owned())
    } else if persim_vm::Kernel::find_installed().is_err() {
        Some("the Debian guest kernel".to_owned())
    } else {
        match Artifacts::locate() {
            Ok(artifacts) => return Some(artifacts),
            Err(e) => Some(e.to_string()),
        }
    };
    let reason = missing.expect("set above");
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {reason} is missing, and CI must run the VM tests: run scripts/setup.sh");
    }
    eprintln!("SKIPPED {test}: {reason} is missing (run scripts/setup.sh)");
    None
}

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("persim-cache")
}

fn boot(config: &VmConfig, artifacts: &Artifacts, pm_file: PathBuf) -> Vm {
    let prepared = prepare(config, artifacts, &cache_dir()).unwrap();
    std::fs::File::create(&pm_file)
        .unwrap()
        .set_len(config.pm_size())
        .unwrap();
    let spec = QemuSpec {
        kernel: prepared.kernel.image,
        initramfs: prepared.initramfs,
        memory_mib: config.memory_mib,
        pm_file,
        pm_size: config.pm_size(),
        plugin: None,
    };
    Vm::boot(&spec, TIMEOUT).unwrap()
}

#[test]
fn commands_run_over_the_serial_console_with_exit_codes() {
    let Some(artifacts) = artifacts_or_skip("commands_run_over_the_serial_console_with_exit_codes")
    else {
        return;
    };
    let config = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut vm = boot(&config, &artifacts, dir.path().join("pm.img"));
    eprintln!("boot: {:.2} s", started.elapsed().as_secs_f64());

    let out = vm
        .run("echo 'it''s' \"$((6 * 7))\"; exit 3", TIMEOUT)
        .unwrap();
    assert_eq!((out.exit_code, out.output.as_str()), (3, "its 42"));

    let started = Instant::now();
    for command in [&config.mkfs, &config.mount] {
        let out = vm.run(command, TIMEOUT).unwrap();
        assert_eq!(out.exit_code, 0, "{command}: {}", out.output);
    }
    eprintln!("setup: {:.2} s", started.elapsed().as_secs_f64());
    let out = vm
        .run(
            "echo HelloWorld > /mnt/myfile && cat /mnt/myfile && grep -c dax /proc/mounts",
            TIMEOUT,
        )
        .unwrap();
    assert_eq!((out.exit_code, out.output.as_str()), (0, "HelloWorld\n1"));
    let started = Instant::now();
    vm.shutdown(TIMEOUT).unwrap();
    eprintln!("shutdown: {:.2} s", started.elapsed().as_secs_f64());
}
