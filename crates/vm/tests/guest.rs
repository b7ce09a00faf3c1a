//! End-to-end tests with the real QEMU and Debian kernel (installed by scripts/setup.sh).
//! Without them they are skipped with a message, except under CI (CI set), where they must run.

use persim_trace::{Hypercall, Op};
use persim_vm::{default_config_dir, prepare, Artifacts, QemuSpec, TraceOptions, Vm, VmConfig};
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

fn trace_options(fs: &str, command: &str, output: PathBuf, artifacts: Artifacts) -> TraceOptions {
    TraceOptions {
        config: VmConfig::for_fs(&default_config_dir(), fs).unwrap(),
        command: command.to_owned(),
        setup: String::new(),
        output,
        reads: false,
        stack_traces: false,
        timeout: TIMEOUT,
        cache_dir: cache_dir(),
        artifacts,
        progress: true,
    }
}

#[test]
fn hello_world_on_ext4_dax_is_traced_between_checkpoints() {
    let Some(artifacts) =
        artifacts_or_skip("hello_world_on_ext4_dax_is_traced_between_checkpoints")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("hello.trace");
    let command = "hypercall checkpoint 1\necho HelloWorld > /mnt/myfile\nhypercall checkpoint 2";
    let started = Instant::now();
    let summary =
        persim_vm::trace(&trace_options("ext4", command, output.clone(), artifacts)).unwrap();
    eprintln!("VM start to end: {:.2} s", started.elapsed().as_secs_f64());
    assert_eq!(summary.exit_code, 0, "{}", summary.output);

    let (header, entries) = persim_trace::read_all(&output).unwrap();
    assert_eq!(
        (header.pm_base, header.pm_size),
        (summary.pm_base, summary.pm_size)
    );
    let ops: Vec<Op> = entries.into_iter().map(|e| e.op).collect();
    let position = |wanted: &Op| ops.iter().position(|op| op == wanted);
    let cp1 = position(&Op::Hypercall(Hypercall::Checkpoint(1))).expect("checkpoint 1");
    let cp2 = position(&Op::Hypercall(Hypercall::Checkpoint(2))).expect("checkpoint 2");
    assert_eq!(ops.first(), Some(&Op::Hypercall(Hypercall::Start)));
    assert_eq!(ops.last(), Some(&Op::Hypercall(Hypercall::Success)));

    // The file's bytes reach PM inside the checkpoint range (in pieces of any size) ...
    let mut pm = vec![0u8; summary.pm_size as usize];
    let mut data_end = None;
    for (i, op) in ops.iter().enumerate().take(cp2).skip(cp1) {
        if let Op::Write { addr, data, .. } = op {
            let (start, end) = (*addr as usize, *addr as usize + data.len());
            pm[start..end].copy_from_slice(data);
            let around = &pm[start.saturating_sub(11)..(end + 11).min(pm.len())];
            if data_end.is_none() && around.windows(11).any(|w| w == b"HelloWorld\n") {
                data_end = Some(i);
            }
        }
    }
    let data_end = data_end.expect("HelloWorld\\n written to PM between the checkpoints");
    // ... and are flushed and fenced after they were written.
    let after = &ops[data_end..cp2];
    assert!(
        after.iter().any(|op| matches!(op, Op::Flush { .. })),
        "no flush after the data"
    );
    assert!(
        after.iter().any(|op| matches!(op, Op::Fence(_))),
        "no fence after the data"
    );
}

#[test]
fn missing_kernel_modules_and_corrupt_configs_are_clear_errors() {
    let Some(artifacts) =
        artifacts_or_skip("missing_kernel_modules_and_corrupt_configs_are_clear_errors")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut opts = trace_options("ext4", "true", dir.path().join("t"), artifacts);
    opts.config.modules.push("no_such_module".to_owned());
    let e = persim_vm::trace(&opts).unwrap_err().to_string();
    assert!(e.contains("`no_such_module`"), "{e}");

    let corrupt = dir.path().join("bad.toml");
    std::fs::write(&corrupt, "name = \"x\"\nmemory_mib = \"lots\"\n").unwrap();
    let e = VmConfig::load(&corrupt).unwrap_err().to_string();
    assert!(e.contains("bad.toml") && e.contains("memory_mib"), "{e}");
}
