//! End-to-end tests with the real QEMU and Debian kernel (installed by scripts/setup.sh).
//! Without them they are skipped with a message, except under CI (CI set), where they must run.

use persim_abi::machine::PM_BASE;
use persim_abi::{PluginArgs, Stacks};
use persim_trace::{FenceKind, FlushKind, Hypercall, Op};
use persim_vm::{
    default_config_dir, prepare, Artifacts, Machine, Plugin, QemuSpec, RecordOptions, TraceSummary,
    Vm, VmConfig,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(120);
/// A boot without a snapshot on a machine shared with other VMs (load average above 20)
/// took over 120 s.
const BOOT_TIMEOUT: Duration = Duration::from_secs(600);

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

/// A guest of `config` on a blank PM file `pm_file` (and a blank disk beside it, if the
/// configuration has an NVMe SSD).
fn boot(config: &VmConfig, artifacts: &Artifacts, pm_file: PathBuf, plugin: Option<Plugin>) -> Vm {
    boot_cpus(config, artifacts, pm_file, plugin, 1)
}

/// [`boot`] with `cpus` virtual CPUs (more than one only without the plugin).
fn boot_cpus(
    config: &VmConfig,
    artifacts: &Artifacts,
    pm_file: PathBuf,
    plugin: Option<Plugin>,
    cpus: u32,
) -> Vm {
    let prepared = prepare(config, artifacts, &cache_dir()).unwrap();
    let blank = |path: &Path, size: u64| {
        std::fs::File::create(path).unwrap().set_len(size).unwrap();
    };
    blank(&pm_file, config.pm_size());
    let blk_file = (config.blk_size() > 0).then(|| pm_file.with_extension("disk"));
    if let Some(disk) = &blk_file {
        blank(disk, config.blk_size());
    }
    let spec = QemuSpec {
        plugin,
        blk_file,
        cpus,
        ..prepared.qemu_spec(config, pm_file)
    };
    Vm::boot(&spec, BOOT_TIMEOUT).unwrap()
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
    let mut vm = boot(&config, &artifacts, dir.path().join("pm.img"), None);
    eprintln!("boot: {:.2} s", started.elapsed().as_secs_f64());

    let out = vm
        .run("echo 'it''s' \"$((6 * 7))\"; exit 3", TIMEOUT)
        .unwrap();
    assert_eq!((out.exit_code, out.output.as_str()), (3, "its 42"));
    // QEMU's CPU time counts a second the guest spins, not one it sleeps.
    let mut cpu_of = |command: &str| {
        let before = vm.cpu_time().unwrap();
        vm.run(command, TIMEOUT).unwrap();
        vm.cpu_time().unwrap() - before
    };
    let idle = cpu_of("sleep 1");
    let busy = cpu_of("timeout 1 sh -c 'while :; do :; done'");
    assert!(
        busy >= Duration::from_millis(200) && busy >= 2 * idle,
        "busy {busy:?}, idle {idle:?}"
    );

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

/// A configuration's `kernel_args` reach the guest kernel, after Persim's own command line.
#[test]
fn kernel_args_of_a_configuration_reach_the_guest_kernel() {
    let Some(artifacts) =
        artifacts_or_skip("kernel_args_of_a_configuration_reach_the_guest_kernel")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("args.toml");
    let base = default_config_dir().join("ext4-dax");
    std::fs::write(
        &file,
        format!(
            "extends = \"{}\"\nname = \"args\"\nkernel_args = \"persim_test_arg=42\"\n",
            base.display()
        ),
    )
    .unwrap();
    let config = VmConfig::load(&file).unwrap();
    let mut vm = boot(&config, &artifacts, dir.path().join("pm.img"), None);
    let out = vm.run("cat /proc/cmdline", TIMEOUT).unwrap();
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert!(
        out.output
            .trim()
            .ends_with(" nokaslr no5lvl no_timer_check rdinit=/init persim_test_arg=42"),
        "{}",
        out.output
    );
    vm.shutdown(TIMEOUT).unwrap();
}

/// A machine of `config` for recording, its phases on stderr.
fn machine(config: VmConfig, artifacts: Artifacts) -> Machine {
    Machine {
        config,
        config_file: None,
        artifacts,
        timeout: TIMEOUT,
        boot_timeout: TIMEOUT,
        cache_dir: cache_dir(),
        jobs: 1,
        progress: true,
    }
}

fn ext4(artifacts: Artifacts) -> Machine {
    machine(
        VmConfig::for_fs(&default_config_dir(), "ext4").unwrap(),
        artifacts,
    )
}

/// Records `command` (without setup) into `output` with `stack_traces`.
fn trace(
    machine: &Machine,
    command: &str,
    output: &Path,
    stack_traces: Stacks,
) -> Result<TraceSummary, persim_vm::VmError> {
    let options = RecordOptions {
        stack_traces,
        ..RecordOptions::default()
    };
    persim_vm::trace(machine, options, "", command, output)
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
    let summary = trace(&ext4(artifacts), command, &output, Stacks::Off).unwrap();
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
    let mut machine = ext4(artifacts);
    machine.config.modules.push("no_such_module".to_owned());
    let e = trace(&machine, "true", &dir.path().join("t"), Stacks::Off)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`no_such_module`"), "{e}");

    let corrupt = dir.path().join("bad.toml");
    std::fs::write(&corrupt, "name = \"x\"\nmemory_mib = \"lots\"\n").unwrap();
    let e = VmConfig::load(&corrupt).unwrap_err().to_string();
    assert!(e.contains("bad.toml") && e.contains("memory_mib"), "{e}");
}

/// A static test program of targets/guest-subjects (`pm-probe`, `held-writes`), built by
/// setup.sh next to `hypercall`; it is added to the initramfs only for the tests that use it.
fn with_guest_tool(test: &str, mut artifacts: Artifacts, tool: &str) -> Option<Artifacts> {
    let path = artifacts.guest_tools[0].with_file_name(tool);
    if !path.is_file() {
        let reason = format!("{} is missing (run scripts/setup.sh)", path.display());
        assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
        persim_vm::testing::skip(test, &reason);
        return None;
    }
    artifacts.guest_tools.push(path);
    Some(artifacts)
}

/// `pm-probe` (targets/guest-subjects/src/bin/pm-probe.rs) in the initramfs, and its path.
fn with_probe(test: &str, artifacts: Artifacts) -> Option<(Artifacts, PathBuf)> {
    let artifacts = with_guest_tool(test, artifacts, "pm-probe")?;
    let probe = artifacts.guest_tools[0].with_file_name("pm-probe");
    Some((artifacts, probe))
}

/// Runs `pm-probe` traced; returns its entries and the two values it prints.
struct ProbeRun {
    entries: Vec<persim_trace::Entry>,
    /// PM offset of the probe file's first byte (from FIEMAP and sysfs, in the guest).
    pm_offset: u64,
    /// Run-time address of `persim_probe_outer` (the binary is a static PIE).
    outer: u64,
}

/// Runs the probe until no interrupt lands between its checkpoints 1 and 3 (at most three
/// times). An interrupt's entry, its return (serializing) or locked instruction there is rightly a
/// `fence` entry, which orders what is pending and so also drops the probe's own `sfence`
/// after it: a correct trace, but not the exact sequence the tests compare.
fn run_probe(artifacts: Artifacts, stack_traces: Stacks) -> ProbeRun {
    for _ in 0..3 {
        let run = run_probe_once(artifacts.clone(), stack_traces);
        let interrupted = [1, 2].iter().any(|&n| {
            between_checkpoints(&run.entries, n).iter().any(|e| {
                matches!(
                    e.op,
                    Op::Fence(FenceKind::Interrupt | FenceKind::Locked | FenceKind::Serializing)
                )
            })
        });
        if !interrupted {
            return run;
        }
        eprintln!("an interrupt landed between the probe's checkpoints: running it again");
    }
    panic!("an interrupt landed between the probe's checkpoints in three runs");
}

fn run_probe_once(artifacts: Artifacts, stack_traces: Stacks) -> ProbeRun {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("probe.trace");
    let machine = ext4(artifacts);
    let summary = trace(&machine, "pm-probe /mnt/probe", &output, stack_traces).unwrap();
    assert_eq!(summary.exit_code, 0, "{}", summary.output);
    let printed = |key: &str| {
        summary
            .output
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
            .unwrap_or_else(|| panic!("pm-probe did not print {key}: {}", summary.output))
    };
    let (header, entries) = persim_trace::read_all(&output).unwrap();
    assert_eq!(
        header.flags & persim_trace::Header::FLAG_STACKS != 0,
        stack_traces.on()
    );
    ProbeRun {
        entries,
        pm_offset: printed("pm_offset="),
        outer: printed("outer="),
    }
}

/// The entries strictly between checkpoints `n` and `n + 1`.
fn between_checkpoints(entries: &[persim_trace::Entry], n: u64) -> &[persim_trace::Entry] {
    let at = |k| {
        entries
            .iter()
            .position(|e| e.op == Op::Hypercall(Hypercall::Checkpoint(k)))
            .unwrap_or_else(|| panic!("no checkpoint {k} in the trace"))
    };
    &entries[at(n) + 1..at(n + 1)]
}

/// What pm-probe does between checkpoints 1 and 2, at offsets from its file's start.
fn expected_probe_ops(base: u64) -> Vec<Op> {
    let write = |offset: u64, data: &[u8], nt| Op::Write {
        addr: base + offset,
        data: data.to_vec(),
        nt,
    };
    vec![
        write(0x00, &0x1122_3344_5566_7788u64.to_le_bytes(), true),
        write(0x40, &0x0102_0304_0506_0708u64.to_le_bytes(), false),
        write(0x4a, &0xbeefu16.to_le_bytes(), false),
        Op::Flush {
            kind: FlushKind::Clwb,
            addr: base + 0x48,
        },
        Op::Flush {
            kind: FlushKind::Clflushopt,
            addr: base + 0x10,
        },
        // rep stosb of 100 bytes at 0x830: merged per cache line.
        write(0x830, &[0x5a; 0x10], false),
        write(0x840, &[0x5a; 0x40], false),
        write(0x880, &[0x5a; 0x14], false),
        Op::Fence(FenceKind::Sfence),
    ]
}

#[test]
fn probe_nt_cached_flush_and_fence_entries_are_exact() {
    const TEST: &str = "probe_nt_cached_flush_and_fence_entries_are_exact";
    let Some((artifacts, _)) = artifacts_or_skip(TEST).and_then(|a| with_probe(TEST, a)) else {
        return;
    };
    let run = run_probe(artifacts, Stacks::Off);
    let ops: Vec<Op> = between_checkpoints(&run.entries, 1)
        .iter()
        .map(|e| e.op.clone())
        .collect();
    assert_eq!(ops, expected_probe_ops(run.pm_offset));
}

/// Symbol -> (address, size) of the probe's functions, from the host's `nm`.
fn symbols(binary: &std::path::Path) -> std::collections::HashMap<String, (u64, u64)> {
    let out = std::process::Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(binary)
        .output()
        .expect("nm (binutils) runs");
    assert!(out.status.success(), "nm {}", binary.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let [addr, size, _, name] = line.split_whitespace().collect::<Vec<_>>()[..] else {
                return None;
            };
            let hex = |s| u64::from_str_radix(s, 16).ok();
            Some((name.to_owned(), (hex(addr)?, hex(size)?)))
        })
        .collect()
}

#[test]
fn kernel_stores_carry_symbolised_call_chains_on_the_stock_kernel() {
    const TEST: &str = "kernel_stores_carry_symbolised_call_chains_on_the_stock_kernel";
    let Some(artifacts) = artifacts_or_skip(TEST) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("hello.trace");
    let command = "echo HelloWorld > /mnt/myfile && sync";
    let summary = trace(&ext4(artifacts), command, &output, Stacks::Shadow).unwrap();
    assert_eq!(summary.exit_code, 0, "{}", summary.output);
    let (_, entries) = persim_trace::read_all(&output).unwrap();
    let symbols = persim_trace::Symbols::of_trace(&output).expect("symbols beside the trace");

    // The Debian kernel has no frame pointers: every kernel store still has a call chain,
    // and every pc and return address lies in a known function.
    let stores: Vec<_> = entries
        .iter()
        .filter(|e| matches!(e.op, Op::Write { .. }))
        .collect();
    assert!(!stores.is_empty());
    let mut functions = std::collections::BTreeSet::new();
    for entry in &stores {
        assert!(!entry.meta.stack.is_empty(), "{entry:#x?}");
        for &address in entry.meta.pc.iter().chain(&entry.meta.stack) {
            let location = symbols
                .resolve(address)
                .unwrap_or_else(|| panic!("{address:#x} in no function: {entry:#x?}"));
            functions.insert(location.function.to_owned());
        }
    }
    for prefix in ["ext4_", "jbd2_", "dax_", "pmem_"] {
        assert!(
            functions.iter().any(|f| f.starts_with(prefix)),
            "no {prefix} frame among {functions:?}"
        );
    }
}

/// Timer interrupts land inside the kernel's copy loops (a leaf that makes no call): the
/// `iret` back is recorded as an interrupt's fence, and the loop's stores after it keep the
/// loop's call chain (they took the interrupt stack's before, often none).
#[test]
fn an_interrupt_inside_a_copy_loop_leaves_the_loops_call_chain_to_its_stores() {
    const TEST: &str = "an_interrupt_inside_a_copy_loop_leaves_the_loops_call_chain_to_its_stores";
    let Some(artifacts) = artifacts_or_skip(TEST) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("copy.trace");
    let command = "dd if=/dev/zero of=/mnt/f bs=1M count=16 2>/dev/null && sync";
    let summary = trace(&ext4(artifacts), command, &output, Stacks::Shadow).unwrap();
    assert_eq!(summary.exit_code, 0, "{}", summary.output);
    let (_, entries) = persim_trace::read_all(&output).unwrap();
    let symbols = persim_trace::Symbols::of_trace(&output).expect("symbols beside the trace");
    let function = |address: u64| symbols.resolve(address).map(|l| l.function.to_owned());
    let mut inside = 0;
    for (i, entry) in entries.iter().enumerate() {
        if entry.op != Op::Fence(persim_trace::FenceKind::Interrupt) {
            continue;
        }
        let (Some(before), Some(after)) = (entries.get(i.wrapping_sub(1)), entries.get(i + 1))
        else {
            continue;
        };
        let stores = matches!(before.op, Op::Write { .. }) && matches!(after.op, Op::Write { .. });
        let same_loop = before.meta.pc.and_then(function) == after.meta.pc.and_then(function);
        if stores && same_loop {
            inside += 1;
            assert_eq!(
                after.meta.stack, before.meta.stack,
                "{before:#x?}\n{after:#x?}"
            );
        }
    }
    assert!(
        inside > 0,
        "no interrupt landed inside a copy loop of 16 MiB"
    );
}

/// Checks the stacks of the probe's call chain (between checkpoints 2 and 3) and returns
/// them: the probe's callers, innermost first, then the return into `main`.
fn probe_chain_stacks(run: &ProbeRun, probe: &std::path::Path) -> Vec<Vec<u64>> {
    let symbols = symbols(probe);
    let load_bias = run.outer - symbols["persim_probe_outer"].0;
    let function_of = |addr: u64| {
        let addr = addr.wrapping_sub(load_bias);
        symbols
            .iter()
            .find(|(_, &(start, size))| (start..start + size).contains(&addr))
            .map(|(name, _)| name.as_str())
    };

    // Stacks do not change what is recorded.
    let ops: Vec<Op> = between_checkpoints(&run.entries, 1)
        .iter()
        .map(|e| e.op.clone())
        .collect();
    assert_eq!(ops, expected_probe_ops(run.pm_offset));

    // inner stores, middle flushes after the call, outer fences after the call.
    let chain = between_checkpoints(&run.entries, 2);
    let (inner, middle, outer) = (
        "persim_probe_inner",
        "persim_probe_middle",
        "persim_probe_outer",
    );
    let expected: [(&str, &[&str]); 3] =
        [(inner, &[middle, outer]), (middle, &[outer]), (outer, &[])];
    assert_eq!(chain.len(), expected.len(), "{chain:#x?}");
    for (entry, (function, callers)) in chain.iter().zip(expected) {
        let pc = entry.meta.pc.expect("every entry has a pc");
        let stack = &entry.meta.stack;
        assert_eq!(function_of(pc), Some(function), "{entry:#x?}");
        assert!(
            stack.len() > callers.len() && stack.len() <= 16,
            "{entry:#x?}"
        );
        let found: Vec<Option<&str>> = stack.iter().map(|&a| function_of(a)).collect();
        let wanted: Vec<Option<&str>> = callers.iter().copied().map(Some).collect();
        assert_eq!(found[..callers.len()], wanted, "{entry:#x?}");
        let caller_of_outer = found[callers.len()].expect("a return into the probe's code");
        assert!(!caller_of_outer.starts_with("persim_probe"), "{entry:#x?}");
    }
    chain.iter().map(|e| e.meta.stack.clone()).collect()
}

#[test]
fn shadow_stacks_follow_the_probe_call_chain_and_agree_with_frame_pointers() {
    const TEST: &str = "shadow_stacks_follow_the_probe_call_chain_and_agree_with_frame_pointers";
    let Some((artifacts, probe)) = artifacts_or_skip(TEST).and_then(|a| with_probe(TEST, a)) else {
        return;
    };
    let shadow = probe_chain_stacks(&run_probe(artifacts.clone(), Stacks::Shadow), &probe);
    let walked = probe_chain_stacks(&run_probe(artifacts, Stacks::FramePointers), &probe);
    // The frame-pointer walk ends in the standard library, built without frame pointers;
    // up to there both give the same return addresses. The two runs may load the static
    // PIE at different addresses, so the addresses are compared relative to the first.
    for (shadow, walked) in shadow.iter().zip(&walked) {
        assert!(shadow.len() >= walked.len(), "{shadow:#x?} vs {walked:#x?}");
        let offsets = |s: &[u64]| s.iter().map(|a| a.wrapping_sub(s[0])).collect::<Vec<_>>();
        assert_eq!(
            offsets(&shadow[..walked.len()]),
            offsets(walked),
            "{shadow:#x?} vs {walked:#x?}"
        );
    }
}

/// The workload of the overhead measurement: 16 MiB written to ext4-DAX in 256 KiB files
/// (allocation, zeroing, copying, journaling), then read back.
const BENCH_WORKLOAD: &str = "i=0; while [ $i -lt 64 ]; do \
    dd if=/dev/zero of=/mnt/f$i bs=64k count=4 2>/dev/null || exit 1; i=$((i + 1)); done; \
    cat /mnt/f* | wc -c";

/// PMicroProfile's Table 3.2 workload (van Breukelen 2023): 32 MiB of random data
/// written to one file on a DAX file system (`head -c 32M /dev/urandom > file`, with
/// busybox's `dd`); prints the file's size.
const PMICROPROFILE_WORKLOAD: &str = "dd if=/dev/urandom of=/mnt/file bs=1M count=32 2>/dev/null \
    || exit 1; wc -c < /mnt/file";

/// What [`time_workload`] measured.
struct WorkloadRun {
    times: Times,
    /// The trace's entries and bytes (tracing on).
    entries: usize,
    trace_bytes: u64,
    /// The counts (counting mode).
    counts: Option<persim_abi::Counts>,
}

/// Guest time of `workload` between `hypercall start` and `success` on a guest of
/// `config` (with its NVMe SSD, if it has one), with the plugin loaded and tracing on or
/// off, or counting; also the trace's size or the counts. The workload must print
/// `expected`.
fn time_workload(
    artifacts: &Artifacts,
    config: &VmConfig,
    mode: PluginMode,
    workload: &str,
    expected: &str,
) -> WorkloadRun {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bench.trace");
    let (tracing, stacks) = match mode {
        PluginMode::Trace(stacks) => (true, stacks),
        PluginMode::Off | PluginMode::Count { .. } => (false, Stacks::Off),
    };
    let plugin = Plugin {
        library: artifacts.plugin.clone(),
        args: PluginArgs {
            tracing,
            count: matches!(mode, PluginMode::Count { .. }),
            every_store: mode == PluginMode::Count { every_store: true },
            stacks,
            blk_size: config.blk_size(),
            ..PluginArgs::new(PM_BASE, config.pm_size(), trace.clone())
        },
    };
    let mut vm = boot(config, artifacts, dir.path().join("pm.img"), Some(plugin));
    for command in [&config.mkfs, &config.mount] {
        let out = vm.run(command, TIMEOUT).unwrap();
        assert_eq!(out.exit_code, 0, "{command}: {}", out.output);
    }
    // With a disk, what setup wrote goes first, and a controller reset after `start` lets
    // the plugin see the queues (as the traced run does); both configurations pay it.
    let script = match config.blk_size() {
        0 => format!("hypercall start\n{workload}\nhypercall success"),
        _ => format!(
            "sync\nhypercall start\necho 1 >/sys/class/nvme/nvme0/reset_controller\n\
             {workload}\nhypercall success"
        ),
    };
    let cpu_before = vm.cpu_time().unwrap();
    let started = Instant::now();
    let out = vm.run(&script, TIMEOUT).unwrap();
    let elapsed = started.elapsed();
    let cpu_after = vm.cpu_time().unwrap();
    // The plugin's own messages (e.g. that it found no task to watch) are not the workload's.
    let printed: Vec<&str> = out
        .output
        .lines()
        .filter(|l| !l.starts_with("qemu: persim-plugin:"))
        .collect();
    assert_eq!(
        (out.exit_code, printed.join("\n")),
        (0, expected.to_owned()),
        "workload failed: {}",
        out.output
    );
    vm.shutdown(TIMEOUT).unwrap();
    let times = Times {
        wall: elapsed,
        cpu: cpu_after - cpu_before,
    };
    let mut run = WorkloadRun {
        times,
        entries: 0,
        trace_bytes: 0,
        counts: None,
    };
    if let PluginMode::Count { .. } = mode {
        let counts = persim_abi::Counts::parse(&std::fs::read_to_string(&trace).unwrap());
        let counts = counts.unwrap();
        assert!(counts.kernel_instructions > 0);
        run.counts = Some(counts);
        return run;
    }
    if !tracing {
        assert!(!trace.exists(), "no trace with tracing off");
        return run;
    }
    let (_, entries) = persim_trace::read_all(&trace).unwrap();
    run.entries = entries.len();
    run.trace_bytes = std::fs::metadata(&trace).unwrap().len();
    run
}

/// What the plugin does after `start`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PluginMode {
    Off,
    Trace(Stacks),
    /// The counting mode (docs/guides/efficiency.md); `every_store`: every store instrumented,
    /// the reference of the reduced instrumentation.
    Count {
        every_store: bool,
    },
}

/// A workload's wall time and QEMU's CPU time during it.
#[derive(Clone, Copy)]
struct Times {
    wall: Duration,
    cpu: Duration,
}

const BENCH_RUNS: usize = 5;

/// scripts/bench-tracer.sh: the figures of docs/results/performance.md "## Tracer". Ignored by
/// default (about two minutes of VM time).
#[test]
#[ignore]
fn bench_tracer_overhead() {
    let Some(artifacts) = artifacts_or_skip("bench_tracer_overhead") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let command = "echo HelloWorld > /mnt/myfile";
    let started = Instant::now();
    let output = dir.path().join("hello.trace");
    let summary = trace(&ext4(artifacts.clone()), command, &output, Stacks::Off).unwrap();
    let hello = started.elapsed();
    assert_eq!(summary.exit_code, 0, "{}", summary.output);
    eprintln!(
        "hello-world on ext4-DAX, VM start to end: {:.2} s",
        hello.as_secs_f64()
    );

    let ext4 = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    compare_tracing(
        &artifacts,
        &ext4,
        "16 MiB workload",
        BENCH_WORKLOAD,
        "16777216",
    );
}

/// The NVMe side of the tracer (docs/results/performance.md, "Tracer"): the same 16 MiB written to
/// ext4 on the NVMe SSD and synced, the plugin decoding the driver's commands or not.
/// Ignored by default (a few minutes of VM time):
/// `cargo test --release -p persim-vm --test guest bench_nvme_tracing -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_nvme_tracing() {
    let Some(artifacts) = artifacts_or_skip("bench_nvme_tracing") else {
        return;
    };
    let config = VmConfig::load(&default_config_dir().join("ext4-nvme.toml")).unwrap();
    let workload = format!("{BENCH_WORKLOAD} && sync");
    compare_tracing(
        &artifacts,
        &config,
        "16 MiB on NVMe, synced",
        &workload,
        "16777216",
    );
}

/// Alternates the workload untraced, traced, and traced with shadow stacks (the machine
/// is shared) and prints the best wall time of [`BENCH_RUNS`] each and their ratios, and
/// the medians of QEMU's CPU time and theirs (less disturbed by other tenants).
fn compare_tracing(
    artifacts: &Artifacts,
    config: &VmConfig,
    name: &str,
    workload: &str,
    expected: &str,
) {
    let (mut off, mut on, mut stacks) = (Vec::new(), Vec::new(), Vec::new());
    let mut traced = (0, 0);
    for _ in 0..BENCH_RUNS {
        let mut time = |mode| {
            let run = time_workload(artifacts, config, mode, workload, expected);
            if mode == PluginMode::Trace(Stacks::Off) {
                traced = (run.entries, run.trace_bytes);
            }
            run.times
        };
        off.push(time(PluginMode::Off));
        on.push(time(PluginMode::Trace(Stacks::Off)));
        stacks.push(time(PluginMode::Trace(Stacks::Shadow)));
    }
    let wall = |runs: &[Times]| {
        runs.iter()
            .map(|t| t.wall.as_secs_f64())
            .collect::<Vec<_>>()
    };
    let min = |runs: &[Times]| wall(runs).into_iter().fold(f64::INFINITY, f64::min);
    let cpu = |runs: &[Times]| {
        let mut cpu: Vec<f64> = runs.iter().map(|t| t.cpu.as_secs_f64()).collect();
        cpu.sort_by(f64::total_cmp);
        cpu[cpu.len() / 2]
    };
    eprintln!(
        "{name} after start, best of {BENCH_RUNS}: tracing off {:.2} s {:.2?}, \
         on {:.2} s {:.2?}: {:.2}x ({} entries, {:.1} MiB trace); \
         with shadow stacks {:.2} s {:.2?}: {:.2}x of tracing on",
        min(&off),
        wall(&off),
        min(&on),
        wall(&on),
        min(&on) / min(&off),
        traced.0,
        traced.1 as f64 / f64::from(1 << 20),
        min(&stacks),
        wall(&stacks),
        min(&stacks) / min(&on),
    );
    eprintln!(
        "{name}, QEMU's CPU time, median of {BENCH_RUNS}: tracing off {:.2} s, on {:.2} s: \
         {:.2}x; with shadow stacks {:.2} s: {:.2}x of tracing on",
        cpu(&off),
        cpu(&on),
        cpu(&on) / cpu(&off),
        cpu(&stacks),
        cpu(&stacks) / cpu(&on),
    );
}

/// The counting mode's cost (docs/results/performance.md, "Counting mode"): the 16 MiB workload
/// with the plugin loaded and tracing off, counting, and counting with every store
/// instrumented (the reference), alternated; also each mode's PM bytes. With
/// `PERSIM_BENCH_BASE_PLUGIN=PATH` (another build of the plugin, e.g. main's), a fourth
/// mode counts with that build, so a change and its base are compared in one series.
/// Ignored by default (a few minutes of VM time):
/// `cargo test --release -p persim-vm --test guest bench_counting_overhead -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_counting_overhead() {
    let Some(artifacts) = artifacts_or_skip("bench_counting_overhead") else {
        return;
    };
    let ext4 = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    let counting = PluginMode::Count { every_store: false };
    let mut modes = vec![
        ("tracing off", PluginMode::Off, artifacts.clone()),
        ("counting", counting, artifacts.clone()),
        (
            "counting every store",
            PluginMode::Count { every_store: true },
            artifacts.clone(),
        ),
    ];
    if let Some(base) = std::env::var_os("PERSIM_BENCH_BASE_PLUGIN") {
        let plugin = PathBuf::from(base);
        assert!(
            plugin.is_file(),
            "PERSIM_BENCH_BASE_PLUGIN: no file {plugin:?}"
        );
        modes.push((
            "counting, base plugin",
            counting,
            Artifacts {
                plugin,
                ..artifacts
            },
        ));
    }
    let mut runs: Vec<Vec<WorkloadRun>> = modes.iter().map(|_| Vec::new()).collect();
    for _ in 0..BENCH_RUNS {
        for ((name, mode, artifacts), runs) in modes.iter().zip(&mut runs) {
            let run = time_workload(artifacts, &ext4, *mode, BENCH_WORKLOAD, "16777216");
            let instructions = run
                .counts
                .as_ref()
                .map(|c| {
                    format!(
                        ", guest instructions {}",
                        c.kernel_instructions + c.user_instructions
                    )
                })
                .unwrap_or_default();
            eprintln!(
                "{name}: wall time {:.2} s, QEMU CPU time {:.2} s{instructions}",
                run.times.wall.as_secs_f64(),
                run.times.cpu.as_secs_f64()
            );
            runs.push(run);
        }
    }
    let best = |runs: &[WorkloadRun]| {
        runs.iter()
            .map(|r| r.times.wall.as_secs_f64())
            .fold(f64::INFINITY, f64::min)
    };
    let median_cpu = |runs: &[WorkloadRun]| {
        let mut cpu: Vec<f64> = runs.iter().map(|r| r.times.cpu.as_secs_f64()).collect();
        cpu.sort_by(f64::total_cmp);
        cpu[cpu.len() / 2]
    };
    let (off_wall, off_cpu) = (best(&runs[0]), median_cpu(&runs[0]));
    for ((name, _, _), runs) in modes.iter().zip(&runs) {
        let pm: Vec<u64> = runs
            .iter()
            .filter_map(|r| Some(r.counts.as_ref()?.pm_bytes_written))
            .collect();
        eprintln!(
            "16 MiB workload after start, {name}: best wall time of {BENCH_RUNS} {:.2} s \
             ({:.2}x), median QEMU CPU time {:.2} s ({:.2}x); PM bytes {pm:?}",
            best(runs),
            best(runs) / off_wall,
            median_cpu(runs),
            median_cpu(runs) / off_cpu,
        );
    }
}

/// The counting mode's reduced instrumentation (kernel stack stores and, until the kernel
/// maps PM into user space, user stores left out; kernel `rep movs`/`rep stos` accounted
/// per execution) counts what instrumenting every store counts: on a workload whose user
/// code stores to PM through a mapping made after `start` (pm-probe's `MAP_SYNC` file),
/// that writes files through the kernel, and that truncates one inside a block, whose
/// tail the kernel zeroes in PM with `rep stos` (3,088 of its bytes).
#[test]
fn counting_only_the_stores_that_can_reach_pm_counts_every_pm_byte() {
    let test = "counting_only_the_stores_that_can_reach_pm_counts_every_pm_byte";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let Some((artifacts, _)) = with_probe(test, artifacts) else {
        return;
    };
    let ext4 = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    // jbd2's 5 s commit timer would land in one run's window and not the other's
    let workload = "mount -o remount,commit=600 /mnt || exit 1; \
        pm-probe /mnt/probe >/dev/null || exit 1; \
        dd if=/dev/zero of=/mnt/f bs=64k count=4 conv=fsync 2>/dev/null || exit 1; \
        truncate -s 1000 /mnt/f && sync || exit 1; echo done";
    let count = |every_store| {
        let mode = PluginMode::Count { every_store };
        time_workload(&artifacts, &ext4, mode, workload, "done")
            .counts
            .unwrap()
    };
    let (reduced, every) = (count(false), count(true));
    eprintln!("reduced {reduced:?}\nevery store {every:?}");
    // pm-probe's user stores alone are 126 bytes; the file 256 KiB
    assert!(every.pm_bytes_written > 256 << 10, "{every:?}");
    assert_eq!(
        reduced.pm_bytes_written, every.pm_bytes_written,
        "reduced {reduced:?}, every store {every:?}"
    );
    assert!(reduced.user_stores_counted, "pm-probe maps PM: {reduced:?}");
}

/// The user-store gate stays shut while no process maps PM: a guest that makes a file
/// system, mounts it and writes files through the kernel stores many values that look
/// like page-table entries mapping PM (numbers just above 4 GiB), none of them into a
/// page table (docs/results/performance.md, "Counting mode").
#[test]
fn counting_a_workload_that_maps_no_pm_leaves_user_stores_out() {
    let test = "counting_a_workload_that_maps_no_pm_leaves_user_stores_out";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let ext4 = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    let workload = "dd if=/dev/urandom of=/mnt/f bs=64k count=16 conv=fsync 2>/dev/null \
        || exit 1; truncate -s 1000 /mnt/f && sync || exit 1; echo done";
    let mode = PluginMode::Count { every_store: false };
    let counts = time_workload(&artifacts, &ext4, mode, workload, "done")
        .counts
        .unwrap();
    assert!(counts.pm_bytes_written > 1 << 20, "{counts:?}");
    assert!(!counts.user_stores_counted, "{counts:?}");
}

/// The counting mode end to end: what a workload writes to PM (ext4-DAX) and to the NVMe
/// SSD (ext4 on it) is counted, a run that writes nothing counts next to nothing, and a
/// guest of two vCPUs counts both (the efficiency series' guests).
#[test]
fn counting_mode_counts_instructions_and_the_bytes_written_to_pm_and_nvme() {
    let test = "counting_mode_counts_instructions_and_the_bytes_written_to_pm_and_nvme";
    let Some(artifacts) = artifacts_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mib = "dd if=/dev/zero of=/mnt/f bs=64k count=16 conv=fsync 2>/dev/null";
    let count_on = |cpus: u32, config: &str, command: &str| {
        let config = VmConfig::load(&default_config_dir().join(config)).unwrap();
        let out = dir.path().join("counts");
        let options = RecordOptions {
            count: true,
            cpus,
            ..RecordOptions::default()
        };
        let summary = persim_vm::trace(
            &machine(config, artifacts.clone()),
            options.clone(),
            "",
            command,
            &out,
        )
        .unwrap();
        assert_eq!(summary.exit_code, 0, "{}", summary.output);
        persim_abi::Counts::parse(&std::fs::read_to_string(&out).unwrap()).unwrap()
    };
    let count = |config: &str, command: &str| count_on(1, config, command);
    let idle = count("ext4-dax.toml", "true");
    let pm = count("ext4-dax.toml", mib);
    assert!(pm.pm_bytes_written >= 1 << 20, "{pm:?}");
    assert!(pm.pm_bytes_written < 8 << 20, "{pm:?}");
    assert_eq!(pm.nvme_bytes_written, 0, "{pm:?}");
    assert!(idle.pm_bytes_written < 64 << 10, "{idle:?}");
    assert!(pm.user_instructions > 0, "{pm:?}");
    assert!(
        pm.kernel_instructions > idle.kernel_instructions + (1 << 20),
        "{pm:?} {idle:?}"
    );
    let nvme = count("ext4-nvme.toml", mib);
    assert!(nvme.nvme_bytes_written >= 1 << 20, "{nvme:?}");
    assert!(nvme.nvme_bytes_written < 8 << 20, "{nvme:?}");
    // Two writers at once on a guest of two vCPUs: the counts are both vCPUs'.
    let two = count_on(
        2,
        "ext4-dax.toml",
        "[ $(grep -c ^processor /proc/cpuinfo) = 2 ] || exit 1; \
         for f in a b; do dd if=/dev/zero of=/mnt/$f bs=64k count=16 conv=fsync 2>/dev/null & \
         done; wait",
    );
    assert!(two.pm_bytes_written >= 2 << 20, "{two:?}");
    assert!(two.pm_bytes_written < 16 << 20, "{two:?}");
    assert!(
        two.kernel_instructions > pm.kernel_instructions,
        "{two:?} {pm:?}"
    );
}

/// Persim's tracing cost on PMicroProfile's workload (docs/design/analysis.md), beside its
/// reported 287x. Ignored by default (a few minutes of VM time):
/// `cargo test --release -p persim-vm --test guest bench_pmicroprofile_workload -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_pmicroprofile_workload() {
    let Some(artifacts) = artifacts_or_skip("bench_pmicroprofile_workload") else {
        return;
    };
    let ext4 = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    compare_tracing(
        &artifacts,
        &ext4,
        "32 MiB from /dev/urandom",
        PMICROPROFILE_WORKLOAD,
        "33554432",
    );
}

#[test]
fn a_restored_guest_answers_at_once_and_sees_its_own_pm_after_attaching() {
    let Some(artifacts) =
        artifacts_or_skip("a_restored_guest_answers_at_once_and_sees_its_own_pm_after_attaching")
    else {
        return;
    };
    let config = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    let prepared = prepare(&config, &artifacts, &cache_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = |pm: &str| {
        let pm_file = dir.path().join(pm);
        std::fs::File::create(&pm_file)
            .unwrap()
            .set_len(config.pm_size())
            .unwrap();
        QemuSpec {
            snapshots: Some(dir.path().join("snapshots")),
            ..prepared.qemu_spec(&config, pm_file)
        }
    };
    std::fs::create_dir(dir.path().join("snapshots")).unwrap();
    // A guest booted on a PM of its own leaves the snapshot, and the first guest is
    // restored from it like every later one; it writes a file system to its PM.
    let mut first = Vm::boot(&spec("a.img"), TIMEOUT).unwrap();
    assert!(first.restored());
    let snapshots: Vec<_> = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(snapshots.len(), 1, "{snapshots:?}");
    let written = first
        .run(
            &format!(
                "persim-pmem detach && persim-pmem attach && {} && {} && echo one > /mnt/f && umount /mnt",
                config.mkfs, config.mount
            ),
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(written.exit_code, 0, "{written:?}");
    drop(first);
    // The second is restored on another PM file holding that file system: after
    // attaching, it sees that PM, not the blank one the snapshot was taken on.
    let second_spec = spec("b.img");
    std::fs::copy(dir.path().join("a.img"), &second_spec.pm_file).unwrap();
    let started = Instant::now();
    let mut second = Vm::boot(&second_spec, TIMEOUT).unwrap();
    let restore = started.elapsed();
    assert!(second.restored());
    let read = second
        .run(
            &format!(
                "persim-pmem detach && persim-pmem attach && {} && cat /mnt/f",
                config.mount
            ),
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(read.exit_code, 0, "{read:?}");
    assert!(read.output.lines().any(|l| l.trim() == "one"), "{read:?}");
    eprintln!("restored in {:.2} s", restore.as_secs_f64());
}

#[test]
fn first_commands_run_before_the_console_and_end_at_a_failure() {
    let Some(artifacts) =
        artifacts_or_skip("first_commands_run_before_the_console_and_end_at_a_failure")
    else {
        return;
    };
    let config = VmConfig::for_fs(&default_config_dir(), "ext4").unwrap();
    let prepared = prepare(&config, &artifacts, &cache_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pm_file = dir.path().join("pm.img");
    std::fs::File::create(&pm_file)
        .unwrap()
        .set_len(config.pm_size())
        .unwrap();
    let first = [
        "echo a > /tmp/first".to_owned(),
        "false".to_owned(),
        "echo c >> /tmp/first".to_owned(),
    ];
    // Booted, and restored from the booted snapshot the test's cache keeps.
    for snapshots in [None, Some(cache_dir())] {
        let spec = QemuSpec {
            snapshots: snapshots.clone(),
            ..prepared.qemu_spec(&config, pm_file.clone())
        };
        let mut vm = Vm::boot_running(&spec, &first, TIMEOUT).unwrap();
        assert_eq!(vm.restored(), snapshots.is_some());
        // The guest ran the first two on its own; the third, after a failure, it skipped.
        let out = vm.run("echo a > /tmp/first", TIMEOUT).unwrap();
        assert_eq!(out.exit_code, 0, "{out:?}");
        assert_eq!(vm.run("false", TIMEOUT).unwrap().exit_code, 1);
        let out = vm.run("cat /tmp/first", TIMEOUT).unwrap();
        assert_eq!((out.exit_code, out.output.trim()), (0, "a"), "{out:?}");
        // A command other than the next first one waits for the first ones to end.
        let mut vm = Vm::boot_running(&spec, &first[..1], TIMEOUT).unwrap();
        let out = vm.run("cat /tmp/first", TIMEOUT).unwrap();
        assert_eq!((out.exit_code, out.output.trim()), (0, "a"), "{out:?}");
    }
}

/// The bytes of blk-probe's write `k` (targets/guest-subjects/src/bin/blk-probe.rs).
fn blk_pattern(k: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ k).collect()
}

#[test]
fn nvme_writes_flushes_and_forced_writes_are_traced_in_order_with_pm() {
    const TEST: &str = "nvme_writes_flushes_and_forced_writes_are_traced_in_order_with_pm";
    let Some(mut artifacts) = artifacts_or_skip(TEST) else {
        return;
    };
    let probe = artifacts.guest_tools[0].with_file_name("blk-probe");
    assert!(
        probe.is_file(),
        "{} is missing (run scripts/setup.sh)",
        probe.display()
    );
    artifacts.guest_tools.push(probe);
    // PM and an NVMe SSD, neither with a file system: the probe writes both devices raw.
    let config = VmConfig::parse(
        r#"
        name = "nvme-probe"
        memory_mib = 512
        pm_size_mib = 64
        nvme_size_mib = 16
        modules = ["nfit", "nd_pmem", "nvme"]
        mkfs = "true"
        mount = "true"
        recover = "true"
        "#,
        &default_config_dir().join("nvme-probe.toml"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("probe.trace");
    let command =
        "blk-probe /dev/nvme0n1 /dev/pmem0 && cat /sys/module/nvme/parameters/sgl_threshold";
    let summary = trace(&machine(config, artifacts), command, &output, Stacks::Off).unwrap();
    assert_eq!(summary.exit_code, 0, "{}", summary.output);
    // The driver was loaded with scatter-gather lists off, as the decoder needs: the
    // kernel command line's module option reached it (init.sh passes it to insmod).
    assert_eq!(
        summary.output.lines().last(),
        Some("0"),
        "{}",
        summary.output
    );
    let (header, entries) = persim_trace::read_all(&output).unwrap();
    assert_eq!(header.blk_size, 16 << 20);
    // The disk was blank when tracing started.
    let initial =
        std::fs::read(persim_trace::Recording::new(&output).initial_block_image()).unwrap();
    assert_eq!(initial.len(), 16 << 20);
    assert!(initial.iter().all(|b| *b == 0));

    // Block entries as (offset, which pattern the data is), `None` for a flush.
    let blocks = |n| -> Vec<Option<(u64, Option<u8>)>> {
        between_checkpoints(&entries, n)
            .iter()
            .filter_map(|e| match &e.op {
                Op::BlkWrite { offset, data } => Some(Some((
                    *offset,
                    (1..10).find(|k| *data == blk_pattern(*k, data.len())),
                ))),
                Op::BlkFlush => Some(None),
                _ => None,
            })
            .collect()
    };
    let write = |offset: u64, k: u8| Some((offset, Some(k)));
    let lengths: Vec<usize> = entries
        .iter()
        .filter_map(|e| match &e.op {
            Op::BlkWrite { data, .. } => Some(data.len()),
            _ => None,
        })
        .collect();
    assert_eq!(lengths, [12 << 10, 4096, 4096]);
    assert_eq!(blocks(1), [write(64 << 10, 1)]);
    // RWF_DSYNC: a write with Force Unit Access (durable at its completion), then the
    // kernel's flush of the device.
    assert_eq!(blocks(2), [write(0, 2), None, None]);
    assert_eq!(blocks(3), [write(8 << 10, 3), None]);
    // The PM write comes before the forced block write, in program order.
    let between = between_checkpoints(&entries, 2);
    let pm_pattern = blk_pattern(9, 512);
    let last_pm = between
        .iter()
        .rposition(|e| matches!(&e.op, Op::Write { data, .. } if pm_pattern.windows(data.len()).any(|w| w == data.as_slice()) && data.len() >= 8))
        .expect("the PM write is traced");
    let first_blk = between
        .iter()
        .position(|e| matches!(e.op, Op::BlkWrite { .. }))
        .unwrap();
    assert!(
        last_pm < first_blk,
        "PM entries at ..={last_pm}, block write at {first_blk}"
    );
}

/// The `key=value` counters of a `dmsetup status` line of the dpwc target.
/// A guest script with DPWC's helpers: `create OPTIONS` makes the table on the NVMe disk
/// and /dev/pmem0, `status` prints its counters; the first failing command fails it.
fn dpwc_script(script: &str) -> String {
    format!(
        "set -e
sz=$(blockdev --getsz /dev/nvme0n1)
create() {{ dmsetup --noudevsync create dpwc --table \"0 $sz dpwc /dev/nvme0n1 /dev/pmem0 $*\" && dmsetup mknodes dpwc; }}
status() {{ dmsetup status dpwc | cut -d' ' -f4-; }}
{script}"
    )
}

/// One write of /tmp/data's first block (kept as /tmp/block) on a new log (its entry at
/// the data offset, 8 KiB: generation 0, chunk 0), written back, the table removed with
/// the entry still in the log, 4 bytes of its data overwritten on PM, and the table
/// created again (replaying the log): its status printed.
const DPWC_CORRUPTED_ENTRY: &str = "create format force generations=2 chunks=4 chunk_kib=8
head -c 4096 /tmp/data >/tmp/block
dd if=/tmp/block of=/dev/mapper/dpwc bs=4096 seek=70 oflag=direct status=none
while ! status | grep -q dirty_bytes=0; do sleep 0.1; done
dmsetup remove dpwc
printf XXXX | dd of=/dev/pmem0 bs=1 seek=$((8192 + 256 + 100)) conv=notrunc status=none && sync
create && status";

/// Three writes of /tmp/data's first blocks to blocks 80..82 on a new log whose writeback
/// waits for 90 %: entries at offsets 0, 4352 and 8704 of chunk 0 of generation 0 (data at
/// 8 KiB). The table is removed, 4 bytes of the second entry's body overwritten on PM, the
/// table created again (replaying the log): its status, then `block B replayed` for each
/// block the origin holds.
const DPWC_DAMAGED_BODY: &str = "create format force generations=2 chunks=2 chunk_kib=64 slots=1 high_watermark=90
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 seek=80 count=3 oflag=direct status=none
dmsetup remove dpwc
printf XXXX | dd of=/dev/pmem0 bs=1 seek=$((8192 + 4352 + 256 + 100)) conv=notrunc status=none && sync
create && status
for i in 0 1 2; do
    dd if=/tmp/data of=/tmp/b$i bs=4096 skip=$i count=1 status=none
    dd if=/dev/nvme0n1 bs=4096 skip=$((80 + i)) count=1 iflag=direct status=none | cmp -s - /tmp/b$i && echo block $((80 + i)) replayed
done; true";

fn dpwc_counters(line: &str) -> std::collections::HashMap<String, u64> {
    line.split_whitespace()
        .filter_map(|field| field.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.parse().unwrap()))
        .collect()
}

/// dm-dpwc.ko (targets/dpwc/module) in the guest on a tiny log, so that 64 direct 4 KiB
/// writes reuse its two generations many times: the data reads back; the status counts
/// the writes acknowledged from PM and written back; a table removed with entries in the
/// log and created again replays them to the origin; after `writeback` nothing is left
/// to replay; an entry corrupted on PM is skipped, not replayed; and tables that would
/// misread the log, or a PM device without DAX, are refused with their dmesg error,
/// without an oops; the module unloads with entries in the log and replays them when
/// loaded again. On both guest kernels.
#[test]
fn dpwc_writes_through_pm_replays_its_log_and_refuses_tables_that_misread_it() {
    let test = "dpwc_writes_through_pm_replays_its_log_and_refuses_tables_that_misread_it";
    for name in ["ext4-dpwc.toml", "ext4-dpwc-6.12.toml"] {
        let config = VmConfig::load(&default_config_dir().join(name)).unwrap();
        let Some(artifacts) = persim_vm::testing::vm_ready(test, &config) else {
            continue;
        };
        if persim_vm::testing::kmod_ready(test, &config, "dm-dpwc").is_some() {
            dpwc_in_guest(&config, &artifacts);
        }
    }
}

/// Runs `script` (with the DPWC helpers and 256 KiB of random /tmp/data) in the guest of
/// vm/ext4-dpwc.toml with the module `module` (`dm-dpwc`, or mutant n's
/// `dpwc-mutant-n/dm-dpwc`, docs/design/dpwc.md "Mutants", built by
/// `DPWC_MUTANT=n bash scripts/build-kmods.sh`), dm-delay loaded and coreutils' `dd` (for
/// `oflag=dsync`) at /usr/bin/dd: its output and the
/// counters of its first status line, after checking that nothing oopsed. `None` when
/// skipped.
fn dpwc_run(
    test: &str,
    module: &str,
    script: &str,
) -> Option<(String, std::collections::HashMap<String, u64>)> {
    let config = VmConfig::load(&default_config_dir().join("ext4-dpwc.toml")).unwrap();
    let artifacts = persim_vm::testing::vm_ready(test, &config)?;
    let built = persim_vm::testing::kmod_ready(test, &config, module)?;
    let mut config = config;
    for m in &mut config.modules {
        if m.ends_with("dm-dpwc.ko") {
            *m = built.to_str().unwrap().to_owned();
        }
    }
    config.modules.push("dm_delay".to_owned());
    config.tools.push("dd".to_owned());
    let dir = tempfile::tempdir().unwrap();
    let mut vm = boot(&config, &artifacts, dir.path().join("pm.img"), None);
    let script = dpwc_script(&format!(
        "head -c 262144 /dev/urandom >/tmp/data
{script}"
    ));
    let out = vm.run(&script, TIMEOUT).unwrap();
    assert_eq!(out.exit_code, 0, "{script}: {}", out.output);
    let counters = dpwc_counters(out.output.lines().find(|l| l.contains("corrupt=")).unwrap());
    let oopses = vm
        .run(
            "dmesg | grep -c -e 'Oops' -e 'BUG:' -e 'WARNING:' || true",
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(oopses.output.trim(), "0", "{}", oopses.output);
    Some((out.output, counters))
}

/// [`dpwc_run`] with mutant `n`.
fn dpwc_mutant_run(
    test: &str,
    n: u32,
    script: &str,
) -> Option<(String, std::collections::HashMap<String, u64>)> {
    dpwc_run(test, &format!("dpwc-mutant-{n}/dm-dpwc"), script)
}

/// The origin behind dm-delay, which holds every write (and flush) 500 ms, so that
/// writebacks stay in flight together: a new log on it with writeback held off
/// (`high_watermark=90`) and at most 8 writebacks in flight. 8 writes of distinct blocks,
/// then `writeback`, then the status as `distinct STATUS`; the table created again (its
/// counters from 0), 5 writes of one block (versions 1..5 of block 8), `writeback`,
/// `block 8 is version 5` when the origin holds the last version, and the status as
/// `overlapping STATUS`.
const DPWC_DELAYED_WRITEBACK: &str = "dmsetup --noudevsync create slow --table \"0 $sz delay /dev/nvme0n1 0 0 /dev/nvme0n1 0 500\" && dmsetup mknodes slow
table=\"0 $sz dpwc /dev/mapper/slow /dev/pmem0 high_watermark=90 writeback_depth=8\"
dmsetup --noudevsync create dpwc --table \"$table format\" && dmsetup mknodes dpwc
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 count=8 oflag=direct status=none
dmsetup message dpwc 0 writeback
echo distinct $(status)
dmsetup remove dpwc && dmsetup --noudevsync create dpwc --table \"$table\" && dmsetup mknodes dpwc
for v in 1 2 3 4 5; do dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 skip=$v seek=8 count=1 oflag=direct status=none; done
dmsetup message dpwc 0 writeback
dd if=/tmp/data of=/tmp/v5 bs=4096 skip=5 count=1 status=none
dd if=/dev/nvme0n1 bs=4096 skip=8 count=1 iflag=direct status=none | cmp -s - /tmp/v5 && echo block 8 is version 5
echo overlapping $(status)";

/// The counters of the status line `WHAT STATUS` of `output`.
fn dpwc_status_of(output: &str, what: &str) -> std::collections::HashMap<String, u64> {
    let line = output
        .lines()
        .find_map(|l| l.strip_prefix(what)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no `{what} STATUS` line: {output}"));
    dpwc_counters(line)
}

/// Parallel writeback (docs/design/dpwc.md, "Writeback and reads"), by the most writebacks
/// in flight at once (`max_inflight`, which counts submissions, not time): 8 entries of
/// distinct blocks go out together, 5 entries of one block one after the other, and the
/// origin ends with the last version.
#[test]
fn dpwc_writes_back_distinct_entries_at_once_and_overlapping_ones_in_order() {
    let test = "dpwc_writes_back_distinct_entries_at_once_and_overlapping_ones_in_order";
    let Some((output, _)) = dpwc_run(test, "dm-dpwc", DPWC_DELAYED_WRITEBACK) else {
        return;
    };
    let (distinct, overlapping) = (
        dpwc_status_of(&output, "distinct"),
        dpwc_status_of(&output, "overlapping"),
    );
    assert!(distinct["max_inflight"] > 1, "{output}");
    assert_eq!(overlapping["max_inflight"], 1, "{output}");
    assert!(output.contains("block 8 is version 5"), "{output}");
    for (status, blocks) in [(&distinct, 8), (&overlapping, 5)] {
        assert_eq!(
            (status["written_back_bytes"], status["dirty_bytes"]),
            (blocks * 4096, 0),
            "{output}"
        );
    }
}

/// Mutant 8 (writeback submits an entry while an earlier overlapping one is in flight)
/// fails the test above: the 5 writes of one block are in flight together.
#[test]
fn dpwc_mutant_8_writes_back_overlapping_entries_at_once() {
    let test = "dpwc_mutant_8_writes_back_overlapping_entries_at_once";
    let Some((output, _)) = dpwc_mutant_run(test, 8, DPWC_DELAYED_WRITEBACK) else {
        return;
    };
    assert!(
        dpwc_status_of(&output, "overlapping")["max_inflight"] > 1,
        "{output}"
    );
}

/// Reads of blocks not yet written back (writeback held off), served from PM: blocks 0..7
/// written and written back (the origin holds /tmp/data's blocks 0..7), then block 2
/// written twice (data blocks 8, then 9), sector 25 once (data sector 160), a FUA write
/// (coreutils' `dd oflag=dsync`) of block 6 (data block 10) and a discard of block 5. Prints `block 2`
/// when a read of block 2 gives the newer write, `blocks 0..7` when a read of all 8
/// gives the newest data of each sector, merged with the origin's, and the status; then,
/// with the table removed without writeback and loaded again (replaying the log), `origin`
/// when the origin holds the same 8 blocks.
const DPWC_READS: &str = "create format high_watermark=90
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 count=8 oflag=direct status=none
dmsetup message dpwc 0 writeback
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 skip=8 seek=2 count=1 oflag=direct status=none
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 skip=9 seek=2 count=1 oflag=direct status=none
dd if=/tmp/data of=/dev/mapper/dpwc bs=512 skip=160 seek=25 count=1 oflag=direct status=none
/usr/bin/dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 skip=10 seek=6 count=1 oflag=direct,dsync status=none
blkdiscard -o $((5 * 4096)) -l 4096 /dev/mapper/dpwc
dd if=/tmp/data of=/tmp/expect bs=4096 count=8 status=none
dd if=/tmp/data of=/tmp/expect bs=4096 skip=9 seek=2 count=1 conv=notrunc status=none
dd if=/tmp/data of=/tmp/expect bs=512 skip=160 seek=25 count=1 conv=notrunc status=none
dd if=/tmp/data of=/tmp/expect bs=4096 skip=10 seek=6 count=1 conv=notrunc status=none
dd if=/dev/zero of=/tmp/expect bs=4096 seek=5 count=1 conv=notrunc status=none
dd if=/tmp/expect of=/tmp/block2 bs=4096 skip=2 count=1 status=none
dd if=/dev/mapper/dpwc bs=4096 skip=2 count=1 iflag=direct status=none | cmp -s - /tmp/block2 && echo block 2
dd if=/dev/mapper/dpwc bs=4096 count=8 iflag=direct status=none | cmp -s - /tmp/expect && echo blocks 0..7
dd if=/dev/nvme0n1 of=/tmp/long bs=4096 skip=12 count=48 iflag=direct status=none
dd if=/tmp/data of=/tmp/long bs=4096 skip=16 seek=4 count=40 conv=notrunc status=none
dd if=/tmp/data of=/dev/mapper/dpwc bs=160k count=1 skip=65536 seek=65536 iflag=skip_bytes oflag=seek_bytes,direct status=none
dd if=/dev/mapper/dpwc bs=192k count=1 skip=49152 iflag=skip_bytes,direct status=none | cmp -s - /tmp/long && echo blocks 12..59
status
dmsetup remove dpwc && create
dd if=/dev/nvme0n1 bs=4096 count=8 iflag=direct status=none | cmp -s - /tmp/expect && echo origin
dd if=/dev/nvme0n1 bs=4096 skip=12 count=48 iflag=direct status=none | cmp -s - /tmp/long && echo long origin
true";

/// Reads served from PM (docs/design/dpwc.md, "Block semantics"): the newest write of each
/// sector, merged with the origin for the rest, a discard reading as zeros, and nothing
/// written back for them; a FUA write and a discard are in the log and replayed. A 160 KiB
/// write is cut into 3 entries of at most a 64 KiB chunk less 4 KiB, and a 192 KiB read
/// (over 256 sectors: its bitmap allocated) merges them with the origin.
#[test]
fn dpwc_serves_reads_of_blocks_not_written_back_from_pm() {
    let test = "dpwc_serves_reads_of_blocks_not_written_back_from_pm";
    let Some((output, counters)) = dpwc_run(test, "dm-dpwc", DPWC_READS) else {
        return;
    };
    assert!(
        output.contains("block 2") && output.contains("blocks 0..7") && output.contains("origin"),
        "{output}"
    );
    assert!(
        output.contains("blocks 12..59") && output.contains("long origin"),
        "{output}"
    );
    assert_eq!(
        (
            counters["written_back_bytes"],
            counters["acked"],
            counters["discards"]
        ),
        (8 * 4096, 15, 1),
        "{output}"
    );
    assert!(counters["read_hits"] >= 3, "{output}");
}

/// Mutant 9 (a read takes the oldest overlapping entry's data first) fails the test above:
/// block 2 reads as the write the newer one superseded.
#[test]
fn dpwc_mutant_9_serves_a_superseded_entry() {
    let test = "dpwc_mutant_9_serves_a_superseded_entry";
    let Some((output, _)) = dpwc_mutant_run(test, 9, DPWC_READS) else {
        return;
    };
    assert!(
        !output.contains("block 2") && !output.contains("blocks 0..7"),
        "{output}"
    );
}

/// Four writers, each of 16 blocks of its own, through one writer slot on a log of 30
/// entries with writeback held off to the full log: the slot's holder sleeps for
/// writeback, so the others wait for the slot. `@WAIT@` waits for the writers; then
/// `writers done N`, `read back` when the target reads as /tmp/data, and the status.
const DPWC_SLOT_WAITERS: &str = "create format generations=2 chunks=1 chunk_kib=64 slots=1 high_watermark=100
for j in 0 1 2 3; do
    (dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 skip=$((j * 16)) seek=$((j * 16)) count=16 oflag=direct status=none && touch /tmp/done$j) &
done
@WAIT@
echo writers done $(ls /tmp | grep -c '^done')
dd if=/dev/mapper/dpwc bs=4096 count=64 iflag=direct status=none | cmp -s - /tmp/data && echo read back
status";

/// [`DPWC_SLOT_WAITERS`] waiting for the writers with `wait`, or for at most `seconds`
/// of the guest's clock (a lost writer never finishes).
fn dpwc_slot_waiters(seconds: Option<u32>) -> String {
    let wait = match seconds {
        None => "wait".to_owned(),
        Some(s) => format!(
            "end=$(($(date +%s) + {s}))
while [ $(ls /tmp | grep -c '^done') -lt 4 ] && [ $(date +%s) -lt $end ]; do sleep 1; done"
        ),
    };
    DPWC_SLOT_WAITERS.replace("@WAIT@", &wait)
}

/// Writers beyond the slots (docs/design/dpwc.md, "Why it is crash-consistent": a writer
/// takes a free slot without a lock, or sleeps until one is freed): all four complete,
/// after waiting for the full log, and every block reads back.
#[test]
fn dpwc_writers_beyond_the_slots_wait_for_one_and_all_complete() {
    let test = "dpwc_writers_beyond_the_slots_wait_for_one_and_all_complete";
    let Some((output, counters)) = dpwc_run(test, "dm-dpwc", &dpwc_slot_waiters(None)) else {
        return;
    };
    assert!(output.contains("writers done 4"), "{output}");
    assert!(output.contains("read back"), "{output}");
    assert_eq!(counters["acked"], 64, "{output}");
    assert!(counters["throttled"] >= 1, "{output}");
}

/// Mutant 10 (a freed slot wakes no one) fails the test above: the writers that slept
/// for the slot sleep on (40 s of the guest's clock, while the others finished), and
/// not all four finish.
#[test]
fn dpwc_mutant_10_loses_a_writer_waiting_for_a_slot() {
    let test = "dpwc_mutant_10_loses_a_writer_waiting_for_a_slot";
    let Some((output, counters)) = dpwc_mutant_run(test, 10, &dpwc_slot_waiters(Some(40))) else {
        return;
    };
    assert!(!output.contains("writers done 4"), "{output}");
    assert!(counters["acked"] < 64, "{output}");
}

/// Mutant 4 (recovery without the CRC checks) fails the corrupted-entry step of
/// `dpwc_writes_through_pm_replays_its_log_and_refuses_tables_that_misread_it`: the corrupted
/// entry is replayed, not counted, and the origin's block is overwritten with the corrupted
/// data.
#[test]
fn dpwc_mutant_4_replays_a_corrupted_entry() {
    let test = "dpwc_mutant_4_replays_a_corrupted_entry";
    let Some((output, counters)) = dpwc_mutant_run(
        test,
        4,
        &format!(
            "{DPWC_CORRUPTED_ENTRY}
dd if=/dev/nvme0n1 bs=4096 skip=70 count=1 iflag=direct status=none | cmp -s - /tmp/block || echo differs"
        ),
    ) else {
        return;
    };
    assert_eq!(
        (counters["corrupt"], counters["replayed"]),
        (0, 1),
        "{output}"
    );
    assert!(output.contains("differs"), "{output}");
}

/// Mutant 7 (a damaged body ends its chunk's scan, as one CRC over header and data did) fails
/// the damaged-body step of the test above: the intact entry after the damaged one in its
/// chunk is lost too.
#[test]
fn dpwc_mutant_7_a_damaged_body_ends_its_chunk() {
    let test = "dpwc_mutant_7_a_damaged_body_ends_its_chunk";
    let Some((output, counters)) = dpwc_mutant_run(test, 7, DPWC_DAMAGED_BODY) else {
        return;
    };
    assert_eq!(
        (counters["corrupt"], counters["replayed"]),
        (1, 1),
        "{output}"
    );
    assert!(
        output.contains("block 80 replayed") && !output.contains("block 82 replayed"),
        "{output}"
    );
}

/// DPWC's watermark writeback and throttling (docs/design/dpwc.md, "Block semantics") on a log
/// of 2 generations of 2 chunks of 64 KiB (capacity 256 KiB; a 4 KiB write takes 4,352
/// bytes, 15 to a chunk) with one writer slot, so that the counts are exact. With
/// `high_watermark=50 low_watermark=25`: 30 direct writes (49.8 %) write nothing back,
/// the 31st (51.5 %) starts the worker, which writes back 16 entries and stops at 15 left
/// (24.9 %). With the high watermark raised to 100 (never reached), 225 more writes
/// (the whole run is 4 times the capacity) fill the log: the writer waits for writeback
/// to free a generation (`throttled`) and goes on; every write completes, and 1 MiB reads
/// back through the target and, after `writeback`, from the origin alone.
#[test]
fn dpwc_writes_back_from_the_high_watermark_and_throttles_writers_at_a_full_log() {
    let test = "dpwc_writes_back_from_the_high_watermark_and_throttles_writers_at_a_full_log";
    let config = VmConfig::load(&default_config_dir().join("ext4-dpwc.toml")).unwrap();
    let Some(artifacts) = persim_vm::testing::vm_ready(test, &config) else {
        return;
    };
    if persim_vm::testing::kmod_ready(test, &config, "dm-dpwc").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut vm = boot(&config, &artifacts, dir.path().join("pm.img"), None);
    let mut run = |script: &str| {
        let script = dpwc_script(script);
        let out = vm.run(&script, TIMEOUT).unwrap();
        assert_eq!(out.exit_code, 0, "{script}: {}", out.output);
        out.output
    };
    const ENTRY: u64 = 4352;
    let below = dpwc_counters(&run("head -c 1048576 /dev/urandom >/tmp/data
create format generations=2 chunks=2 chunk_kib=64 slots=1 high_watermark=50 low_watermark=25
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 count=30 oflag=direct status=none
status"));
    assert_eq!(
        (
            below["acked"],
            below["written_back_bytes"],
            below["dirty_bytes"]
        ),
        (30, 0, 30 * ENTRY),
        "below the high watermark: {below:?}"
    );
    // The worker runs on its own: wait (at least 10 s, within the script's timeout) for
    // it to reach the low watermark.
    let crossed = dpwc_counters(&run(&format!(
        "dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 skip=30 seek=30 count=1 oflag=direct status=none
i=0
while ! status | grep -q 'dirty_bytes={} ' && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
status",
        15 * ENTRY
    )));
    assert_eq!(
        (
            crossed["acked"],
            crossed["written_back_bytes"],
            crossed["dirty_bytes"],
            crossed["throttled"]
        ),
        (31, 16 * 4096, 15 * ENTRY, 0),
        "past the high watermark: {crossed:?}"
    );
    let full = dpwc_counters(&run("dmsetup message dpwc 0 high_watermark 100
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 skip=31 seek=31 oflag=direct status=none
status"));
    // The log holds 60 entries: the writer waits for writeback at least once. How often
    // depends on how fast the writebacks in flight complete, which frees a generation as
    // soon as it is written back; every write is either written back or in the log.
    assert_eq!(full["acked"], 256, "a full log: {full:?}");
    assert!(full["throttled"] >= 1, "a full log: {full:?}");
    assert_eq!(
        full["written_back_bytes"] / 4096 + full["dirty_bytes"] / ENTRY,
        256,
        "a full log: {full:?}"
    );
    run(
        "dd if=/dev/mapper/dpwc bs=4096 count=256 iflag=direct status=none | cmp - /tmp/data
dmsetup message dpwc 0 writeback && dmsetup remove dpwc
dd if=/dev/nvme0n1 bs=4096 count=256 iflag=direct status=none | cmp - /tmp/data",
    );
    let oopses = run("dmesg | grep -c -e 'Oops' -e 'BUG:' -e 'WARNING:' || true");
    assert_eq!(oopses.trim(), "0");
    vm.shutdown(TIMEOUT).unwrap();
}

fn dpwc_in_guest(config: &VmConfig, artifacts: &Artifacts) {
    let dir = tempfile::tempdir().unwrap();
    let mut vm = boot(config, artifacts, dir.path().join("pm.img"), None);
    // Each script runs in a shell of its own: the helpers come first.
    let mut run = |script: &str| {
        let script = dpwc_script(script);
        let out = vm.run(&script, TIMEOUT).unwrap();
        assert_eq!(
            out.exit_code, 0,
            "{}: {script}: {}",
            config.name, out.output
        );
        out.output
    };
    run("head -c 262144 /dev/urandom >/tmp/data");
    let first = run("create format generations=2 chunks=4 chunk_kib=8 slots=2
dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 oflag=direct conv=fsync status=none
dd if=/dev/mapper/dpwc bs=4096 count=64 iflag=direct status=none | cmp - /tmp/data
status");
    let first = dpwc_counters(&first);
    assert_eq!(first["acked"], 64, "{first:?}");
    assert!(first["written_back_bytes"] > 0, "{first:?}");
    assert!(first["gens_in_use"] >= 1, "{first:?}");
    // The CRC is SSE4.2's crc32 instruction (`-cpu max` has it), fused with the copy
    // to PM, not the library's table lookups.
    let crc = run("dmesg | grep -c 'dpwc: CRC-32C by the crc32 instruction' || true");
    assert_ne!(crc.trim(), "0", "{}: {crc}", config.name);
    // Removed with its last generation live and the module unloaded: the log persists
    // and the module loaded again replays it.
    let replayed = run("dmsetup remove dpwc && rmmod dm_dpwc
! grep -q '^dm_dpwc ' /proc/modules
insmod /lib/persim-modules/dm-dpwc.ko && create && status
dd if=/dev/nvme0n1 bs=4096 count=64 iflag=direct status=none | cmp - /tmp/data");
    let replayed = dpwc_counters(&replayed);
    assert!(
        replayed["replayed"] > 0 && replayed["corrupt"] == 0,
        "{replayed:?}"
    );
    assert_eq!(replayed["gens_in_use"], 0, "{replayed:?}");
    // `writeback` writes everything back and frees its generations: nothing to replay.
    let drained = run(
        "dd if=/tmp/data of=/dev/mapper/dpwc bs=4096 count=3 oflag=direct status=none
dmsetup message dpwc 0 writeback && status && dmsetup remove dpwc && create && status",
    );
    let drained: Vec<_> = drained.lines().map(dpwc_counters).collect();
    assert_eq!(
        (drained[0]["gens_in_use"], drained[0]["dirty_bytes"]),
        (0, 0),
        "{drained:?}"
    );
    assert_eq!(drained[1]["replayed"], 0, "{drained:?}");
    // A corrupted entry is never replayed: the origin keeps the block written back.
    let corrupted = run(&format!(
        "dmsetup remove dpwc
{DPWC_CORRUPTED_ENTRY}
dd if=/dev/nvme0n1 bs=4096 skip=70 count=1 iflag=direct status=none | cmp - /tmp/block"
    ));
    let corrupted = dpwc_counters(&corrupted);
    assert_eq!(
        (
            corrupted["corrupt"],
            corrupted["replayed"],
            corrupted["held"]
        ),
        (1, 0, 1),
        "{corrupted:?}"
    );
    // The damaged log is kept (and reported at every load) until `drop_damaged`.
    let dropped = run("dmsetup remove dpwc && create && status
dmesg | grep -q 'drop_damaged. frees them'
dmsetup message dpwc 0 drop_damaged && status
dmsetup remove dpwc && create && status");
    let dropped: Vec<_> = dropped.lines().map(dpwc_counters).collect();
    let fields = |c: &std::collections::HashMap<String, u64>| {
        (c["corrupt"], c["replayed"], c["held"], c["gens_in_use"])
    };
    assert_eq!(
        dropped.iter().map(fields).collect::<Vec<_>>(),
        [(1, 0, 1, 1), (1, 0, 0, 0), (0, 0, 0, 0)],
        "{dropped:?}"
    );
    // A damaged body costs its entry alone: the entry after it in its chunk replays.
    let body = run(&format!("dmsetup remove dpwc\n{DPWC_DAMAGED_BODY}"));
    let counters = dpwc_counters(body.lines().find(|l| l.contains("corrupt=")).unwrap());
    assert_eq!(
        (counters["corrupt"], counters["replayed"], counters["held"]),
        (1, 2, 1),
        "{body}"
    );
    assert!(
        body.contains("block 80 replayed")
            && !body.contains("block 81 replayed")
            && body.contains("block 82 replayed"),
        "{body}"
    );
    // Tables that would misread the log (the damaged-body step's, 2 generations of 64 KiB
    // chunks) are refused, with the reason in dmesg.
    let refused = [
        (
            "create generations=3",
            "generations=3 but the cache was formatted with 2",
        ),
        ("create format", "holds a dpwc cache: add \"force\""),
        (
            "create chunk_kib=9",
            "chunk_kib=9 but the cache was formatted with 64",
        ),
        ("create bogus=1", "bad option \"bogus=1\""),
    ];
    run("dmsetup remove dpwc");
    for (table, message) in refused {
        let out = run(&format!(
            "dmesg -c >/dev/null; {table} 2>&1 && echo CREATED; dmesg"
        ));
        assert!(
            !out.contains("CREATED") && out.contains(message),
            "{table}: {out}"
        );
    }
    let foreign = run("dmesg -c >/dev/null
printf 'DPWCSUP1\\001' | dd of=/dev/pmem0 conv=notrunc status=none && sync
create 2>&1 && echo CREATED; dmesg -c
head -c 64 /dev/zero | dd of=/dev/pmem0 conv=notrunc status=none && sync
create 2>&1 && echo CREATED; dmesg -c
dmsetup --noudevsync create dpwc --table \"0 $(blockdev --getsz /dev/pmem0) dpwc /dev/pmem0 /dev/nvme0n1 format\" 2>&1 && echo CREATED; dmesg -c");
    assert!(
        !foreign.contains("CREATED")
            && foreign.contains("the dpwc superblock is corrupt or of another version")
            && foreign.contains("has no dpwc superblock: create the table with \"format\"")
            && foreign.contains("nvme0n1 does not support DAX"),
        "{foreign}"
    );
    let oopses = run("dmesg | grep -c -e 'Oops' -e 'BUG:' -e 'WARNING:' || true");
    assert_eq!(oopses.trim(), "0");
    vm.shutdown(TIMEOUT).unwrap();
}

/// The region statistics of pm-throttle.ko (/sys/kernel/pm_throttle/region0/*), as
/// `name value` lines after a `@@stats` line of the guest's output.
fn throttle_stats(output: &str) -> std::collections::HashMap<String, i64> {
    output
        .lines()
        .skip_while(|line| *line != "@@stats")
        .filter_map(|line| line.split_once(' '))
        .map(|(name, value)| (name.to_owned(), value.parse().unwrap()))
        .collect()
}

/// A guest script: pm-throttle.ko loaded again with `options` (the livepatch disabled and
/// the module removed first, so that its statistics start at zero), then fio's `jobs`
/// writers of 128 KiB blocks (long copies, so that writers meet in them) through DAX,
/// verified (crc32c), then the statistics.
fn throttle_run(options: &str, jobs: u32) -> String {
    format!(
        "set -e
unload
insmod /lib/persim-modules/pm-throttle.ko {options}
rm -f /mnt/w.*
fio --name=w --directory=/mnt --thread --numjobs={jobs} --size=4m --bs=128k --rw=write \
--ioengine=psync --verify=crc32c --do_verify=1 --verify_fatal=1 --minimal >/tmp/fio.out
echo @@stats
cd /sys/kernel/pm_throttle/region0 && for f in *; do echo \"$f $(cat $f)\"; done"
    )
}

/// A guest script: pm-throttle.ko loaded again with `options`, then two writers held in its
/// copy at once by `held-writes` (each write's source pages missing until both are in
/// `pmt_copy`), which prints the region's `writers` count while they are held; then the
/// statistics.
fn throttle_held(options: &str) -> String {
    format!(
        "set -e
unload
insmod /lib/persim-modules/pm-throttle.ko {options}
rm -f /mnt/held.*
held-writes --writers 2 --in pmt_copy --probe /sys/kernel/pm_throttle/region0/writers /mnt
echo @@stats
cd /sys/kernel/pm_throttle/region0 && for f in *; do echo \"$f $(cat $f)\"; done"
    )
}

/// Disables pm-throttle's livepatch, waits until the kernel has left it, removes the
/// module and checks that it is gone.
const THROTTLE_UNLOAD: &str = "unload() {
    p=/sys/kernel/livepatch/pm_throttle
    [ -d $p ] && echo 0 >$p/enabled
    while [ -d $p ]; do sleep 0.2; done
    grep -q '^pm_throttle ' /proc/modules && rmmod pm_throttle
    ! grep -q '^pm_throttle ' /proc/modules
}";

/// pm-throttle.ko (targets/pm-throttle, docs/design/pm-throttle.md) in a 4-vCPU guest on ext4-DAX
/// and XFS-DAX, on both guest kernels: 4 fio writers of 128 KiB blocks with crc32c
/// verification in each mode read their data back; two writers held inside the copy
/// (`held-writes`) are both counted in `off` mode, where `semaphore` with limit 1 lets one
/// in and makes the other wait; `semaphore` never has 2 writers in the copy; in
/// `workqueue` mode its one worker copies every copy (the threshold is 4 KiB); `dma` and
/// unknown modes are refused with their reason; the livepatch is disabled and the module
/// removed while 4 writers run, and their data still verifies; no oops.
#[test]
fn pm_throttle_bounds_writers_per_mode_and_unloads_under_load() {
    let test = "pm_throttle_bounds_writers_per_mode_and_unloads_under_load";
    for name in [
        "ext4-throttle-workqueue.toml",
        "ext4-throttle-workqueue-6.12.toml",
        "xfs-throttle-workqueue.toml",
        "xfs-throttle-workqueue-6.12.toml",
    ] {
        let mut config = VmConfig::load(&default_config_dir().join(name)).unwrap();
        let Some(artifacts) = persim_vm::testing::vm_ready(test, &config) else {
            continue;
        };
        if persim_vm::testing::kmod_ready(test, &config, "pm-throttle").is_none() {
            continue;
        }
        let Some(artifacts) = with_guest_tool(test, artifacts, "held-writes") else {
            return;
        };
        // fio's shared libraries (Ceph's, Gluster's) fill 80 MB of the initramfs.
        config.tools.push("fio".to_owned());
        config.memory_mib = 1536;
        throttle_in_guest(&config, &artifacts);
    }
}

fn throttle_in_guest(config: &VmConfig, artifacts: &Artifacts) {
    let dir = tempfile::tempdir().unwrap();
    let mut vm = boot_cpus(config, artifacts, dir.path().join("pm.img"), None, 4);
    let mut run = |script: &str| {
        let script = format!("{THROTTLE_UNLOAD}\n{script}");
        let out = vm.run(&script, Duration::from_secs(600)).unwrap();
        assert_eq!(
            out.exit_code, 0,
            "{}: {script}: {}",
            config.name, out.output
        );
        out.output
    };
    // Loaded at boot in workqueue mode (the configuration's kernel_args).
    let loaded = run(&format!(
        "{} && {}
cat /sys/module/pm_throttle/parameters/mode /sys/kernel/livepatch/pm_throttle/enabled
dmesg | grep -c 'pm_throttle: dax_copy_from_iter() replaced (kernel'",
        config.mkfs, config.mount
    ));
    assert!(
        loaded.ends_with("workqueue\n1\n1"),
        "{}: {loaded}",
        config.name
    );
    let off = throttle_stats(&run(&throttle_run("mode=off", 4)));
    let off_held = run(&throttle_held("mode=off"));
    let semaphore = throttle_stats(&run(&throttle_run("mode=semaphore limit=1", 4)));
    let semaphore_held = run(&throttle_held("mode=semaphore limit=1"));
    let workqueue = throttle_stats(&run(&throttle_run(
        "mode=workqueue workers=1 threshold=4096",
        4,
    )));
    let name = &config.name;
    eprintln!("{name}: off {off:?}\nsemaphore {semaphore:?}\nworkqueue {workqueue:?}");
    // fio writes 4 x 4 MiB, then verifies.
    let written = 16 << 20;
    assert_eq!(off["bytes_off"], written, "{name}: {off:?}");
    // Two writers held in the copy at once: both counted without the bound, one let in
    // and the other waiting with it.
    assert!(
        off_held.contains("held: /sys/kernel/pm_throttle/region0/writers = 2\n"),
        "{name}: {off_held}"
    );
    assert!(
        semaphore_held.contains("held: /sys/kernel/pm_throttle/region0/writers = 1\n"),
        "{name}: {semaphore_held}"
    );
    let waited = throttle_stats(&semaphore_held);
    assert!(
        waited["waits"] >= 1 && waited["max_writers"] == 1,
        "{name}: {semaphore_held}"
    );
    assert_eq!(
        semaphore["bytes_semaphore"], written,
        "{name}: {semaphore:?}"
    );
    assert!(semaphore["max_writers"] == 1, "{name}: {semaphore:?}");
    assert_eq!(
        workqueue["bytes_workqueue"], written,
        "{name}: {workqueue:?}"
    );
    // Every copy is of whole 4 KiB blocks, so none stays under the threshold.
    assert_eq!(
        (
            workqueue["copies_by_workers"],
            workqueue["bytes_by_workers"]
        ),
        (workqueue["copies_workqueue"], written),
        "{name}: {workqueue:?}"
    );
    assert_eq!(workqueue["max_writers"], 1, "{name}: {workqueue:?}");
    // Refused modes leave the mode as it was and say why.
    let refused = run("dmesg -c >/dev/null
p=/sys/module/pm_throttle/parameters/mode
echo dma >$p 2>/dev/null && echo SET
echo bogus >$p 2>/dev/null && echo SET
cat $p; dmesg");
    assert!(
        !refused.contains("SET")
            && refused.contains("workqueue\n")
            && refused.contains("mode dma refused: no DMA engine")
            && refused.contains("mode \"bogus\" refused"),
        "{name}: {refused}"
    );
    // Unloaded while 4 writers run (semaphore mode, limit 1): every write verifies.
    let unloaded = run("set -e
unload
insmod /lib/persim-modules/pm-throttle.ko mode=semaphore limit=1
rm -f /mnt/w.*
fio --name=w --directory=/mnt --thread --numjobs=4 --size=4m --bs=16k --rw=write \
--ioengine=psync --verify=crc32c --do_verify=1 --verify_fatal=1 --minimal >/tmp/fio.out &
while [ ! -f /mnt/w.3.0 ]; do sleep 0.1; done
unload
wait $!
echo copies $(cat /proc/modules | grep -c pm_throttle)
dmesg | grep -c -e 'Oops' -e 'BUG:' -e 'WARNING:' || true");
    assert!(unloaded.ends_with("copies 0\n0"), "{name}: {unloaded}");
    vm.shutdown(TIMEOUT).unwrap();
}

/// A traced 16 KiB DAX write on ext4 with pm-throttle.ko in workqueue mode
/// (vm/ext4-throttle-workqueue.toml): the module's worker copies it, its data reaches PM in
/// non-temporal stores only, and an `sfence` follows the last of them before any other PM
/// store or fence (the worker's `wmb()`, before the caller's write returns:
/// docs/design/pm-throttle.md). busybox `cat` writes with sendfile, a kernel buffer, which the kernel
/// copies without a fence of its own (a user buffer's copy ends in one): without the
/// worker's `wmb()` the next fence is the locked decrement after it, and the test fails.
#[test]
fn pm_throttle_worker_copies_are_non_temporal_and_fenced() {
    let test = "pm_throttle_worker_copies_are_non_temporal_and_fenced";
    let config =
        VmConfig::load(&default_config_dir().join("ext4-throttle-workqueue.toml")).unwrap();
    let Some(artifacts) = persim_vm::testing::vm_ready(test, &config) else {
        return;
    };
    if persim_vm::testing::kmod_ready(test, &config, "pm-throttle").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("throttle.trace");
    // 16 KiB of a pattern no other store holds: "pmthrottle" and a line number.
    let command =
        "i=0; while [ $i -lt 1024 ]; do printf 'pmthrottle%05d\\n' $i; i=$((i + 1)); done >/tmp/d
hypercall checkpoint 1
cat /tmp/d >/mnt/f
hypercall checkpoint 2
cat /sys/kernel/pm_throttle/region0/copies_by_workers";
    let summary = trace(&machine(config, artifacts), command, &output, Stacks::Off).unwrap();
    assert_eq!(summary.exit_code, 0, "{}", summary.output);
    assert_eq!(
        summary.output.trim().lines().last(),
        Some("1"),
        "{}",
        summary.output
    );
    let (_, entries) = persim_trace::read_all(&output).unwrap();
    let ops: Vec<Op> = entries.into_iter().map(|e| e.op).collect();
    let position = |wanted: &Op| ops.iter().position(|op| op == wanted);
    let cp1 = position(&Op::Hypercall(Hypercall::Checkpoint(1))).expect("checkpoint 1");
    let cp2 = position(&Op::Hypercall(Hypercall::Checkpoint(2))).expect("checkpoint 2");
    // Where the file's data lies on PM: the pattern's first line in the writes' image.
    let mut pm = vec![0u8; summary.pm_size as usize];
    for op in &ops[cp1..cp2] {
        if let Op::Write { addr, data, .. } = op {
            pm[*addr as usize..*addr as usize + data.len()].copy_from_slice(data);
        }
    }
    let start = pm
        .windows(16)
        .position(|w| w == b"pmthrottle00000\n")
        .expect("the data on PM") as u64;
    let data: Vec<(usize, bool)> = ops[cp1..cp2]
        .iter()
        .enumerate()
        .filter_map(|(i, op)| match op {
            Op::Write { addr, nt, .. } if (start..start + 16384).contains(addr) => {
                Some((cp1 + i, *nt))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        &pm[start as usize + 16384 - 16..start as usize + 16384],
        b"pmthrottle01023\n"
    );
    assert!(data.iter().all(|(_, nt)| *nt), "a cached store of the data");
    let last = data.last().unwrap().0;
    let mut after = ops[last + 1..cp2]
        .iter()
        .filter(|op| matches!(op, Op::Write { .. } | Op::Fence(_)));
    let mut next = after.next();
    // An interrupt may land between the last store and the sfence: its entry, its
    // handler's locked instructions and its return are fences the model rightly records;
    // the first entry after them must still be the worker's sfence.
    if next == Some(&Op::Fence(FenceKind::Interrupt)) {
        next = after.find(|op| {
            !matches!(
                op,
                Op::Fence(FenceKind::Interrupt | FenceKind::Locked | FenceKind::Serializing)
            )
        });
    }
    // The worker's own `sfence`, not only the locked instructions that follow it.
    assert_eq!(
        next,
        Some(&Op::Fence(FenceKind::Sfence)),
        "after the last data store"
    );
}

/// pm-throttle's overhead where PM is not overloaded (docs/results/performance.md, "Subjects"):
/// one fio writer of 16 KiB blocks (32 MiB on the 64 MiB PM, `sync=1`) on ext4-DAX in a 1-vCPU guest, each
/// mode against `off`, the modes taking turns for `BENCH_RUNS` rounds; fio's bandwidth in
/// the guest and QEMU's CPU time per GiB (under TCG it grows with the guest instructions
/// executed). Ignored by default (a few minutes of VM time):
/// `cargo test --release -p persim-vm --test guest bench_pm_throttle -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_pm_throttle_modes() {
    let test = "bench_pm_throttle_modes";
    let mut config =
        VmConfig::load(&default_config_dir().join("ext4-throttle-workqueue.toml")).unwrap();
    let Some(artifacts) = persim_vm::testing::vm_ready(test, &config) else {
        return;
    };
    if persim_vm::testing::kmod_ready(test, &config, "pm-throttle").is_none() {
        return;
    }
    config.tools.push("fio".to_owned());
    config.memory_mib = 1536;
    let dir = tempfile::tempdir().unwrap();
    let mut vm = boot(&config, &artifacts, dir.path().join("pm.img"), None);
    let run = |vm: &mut Vm, script: &str| {
        let out = vm
            .run(
                &format!("{THROTTLE_UNLOAD}\n{script}"),
                Duration::from_secs(1200),
            )
            .unwrap();
        assert_eq!(out.exit_code, 0, "{script}: {}", out.output);
        out.output
    };
    run(&mut vm, &format!("{} && {}", config.mkfs, config.mount));
    let modes = [
        ("off", "mode=off"),
        ("semaphore", "mode=semaphore limit=1"),
        ("workqueue", "mode=workqueue workers=1 threshold=4096"),
    ];
    let mut results: Vec<(f64, f64)> = vec![(0.0, 0.0); modes.len()];
    for _ in 0..BENCH_RUNS {
        for (i, (_, options)) in modes.iter().enumerate() {
            run(
                &mut vm,
                &format!(
                "unload && insmod /lib/persim-modules/pm-throttle.ko {options} && rm -f /mnt/b.*"
                ),
            );
            let before = vm.cpu_time().unwrap();
            let bw = run(
                &mut vm,
                "fio --name=b --directory=/mnt --size=32m --bs=16k --rw=write --sync=1 \
                 --ioengine=psync --minimal >/tmp/b.out && cut -d';' -f48 /tmp/b.out",
            );
            let cpu = (vm.cpu_time().unwrap() - before).as_secs_f64();
            let kib_s: f64 = bw.trim().parse().expect(&bw);
            results[i].0 += kib_s / 1024.0 / BENCH_RUNS as f64;
            results[i].1 += cpu * 32.0 / BENCH_RUNS as f64; // s per GiB: 32 MiB runs
        }
    }
    let (off_bw, off_cpu) = results[0];
    for ((name, _), (bw, cpu)) in modes.iter().zip(&results) {
        eprintln!(
            "{name:9}: {bw:7.1} MiB/s ({:.3} of off), QEMU CPU {cpu:6.1} s/GiB ({:.3} of off)",
            bw / off_bw,
            cpu / off_cpu
        );
    }
    vm.shutdown(TIMEOUT).unwrap();
}
