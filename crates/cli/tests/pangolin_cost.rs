//! Pangolin's cost per transaction against libpmemobj's and libpmemobj's with a replica
//! pool set (the dissertation's "Pmemobj-R"), in Persim's guest with the plugin's counting
//! mode (as `persim efficiency run --vm` counts fio): guest instructions, user and kernel,
//! and bytes stored to PM, which hold on any host. Each map of targets/pangolin/maps runs
//! the same workload on each library: 10 keys inserted in setup, then counted, 50 inserts
//! (50 transactions) against none (the pool opened and closed, the same 50 words parsed by
//! the shell); their difference over 50 is one transaction. Kernel instructions include the guest's timer interrupts, which
//! follow TCG's speed: that column is noisy, the user column and PM bytes are exact.
//! docs/design/pangolin.md, "Cost".
//!
//! The guest tools are built first (both build scripts are idempotent): the VM
//! configuration names the binaries in target/, and a stale pmdk-map (one from before it
//! created a pool set's parts) failed the Pmemobj-R runs with `open "/mnt/pool.0"`.
//!
//! `cargo test --release -p persim --test pangolin_cost -- --ignored --nocapture`
//! (`PANGOLIN_COST_LIBRARIES=Pangolin` measures only the libraries named, comma-separated).

use persim_abi::Counts;
use persim_vm::{Machine, RecordOptions, TracingVm, VmConfig};
use std::path::Path;
use std::time::Duration;

/// Transactions counted: keys 11 to 60 inserted.
const TXS: u64 = 50;

struct Library {
    name: &'static str,
    tool: &'static str,
    pool: &'static str,
    /// Shell lines before the pool is created.
    prepare: &'static str,
}

const LIBRARIES: [Library; 3] = [
    Library {
        name: "Pangolin",
        tool: "pangolin-map",
        pool: "/mnt/pool",
        prepare: "",
    },
    Library {
        name: "Pmemobj",
        tool: "pmdk-map-shipped",
        pool: "/mnt/pool",
        prepare: "",
    },
    Library {
        name: "Pmemobj-R",
        tool: "pmdk-map-shipped",
        pool: "/mnt/pool.set",
        prepare:
            "printf 'PMEMPOOLSET\\n8M /mnt/pool.0\\nREPLICA\\n8M /mnt/pool.r\\n' >/mnt/pool.set\n",
    },
];

/// Runs the build scripts of the tools the VM configuration names (pangolin-map and
/// pmdk-map-shipped), so that the bench measures this tree's code.
fn build_tools() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for script in [
        "targets/pmdk-examples/build.sh",
        "targets/pangolin/maps/build.sh",
    ] {
        let out = std::process::Command::new("bash")
            .arg(root.join(script))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn count(machine: &Machine, setup: &str, command: &str, out: &Path) -> Counts {
    let options = RecordOptions {
        count: true,
        ..RecordOptions::default()
    };
    let mut vm = TracingVm::new(machine, options).unwrap();
    let summary = vm.record(setup, command, out).unwrap();
    let _ = vm.shutdown();
    assert_eq!(summary.exit_code, 0, "{command}: {}", summary.output);
    Counts::parse(&std::fs::read_to_string(out).unwrap()).unwrap()
}

#[test]
#[ignore]
fn bench_pangolin_against_pmemobj_and_pmemobj_r() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../targets/pangolin/maps/tests/vm.toml")
        .canonicalize()
        .unwrap();
    let config = VmConfig::load(&file).unwrap();
    let Some(artifacts) = persim_vm::testing::vm_ready("bench_pangolin", &config) else {
        return;
    };
    build_tools();
    let machine = Machine {
        config,
        config_file: Some(file),
        artifacts,
        timeout: Duration::from_secs(600),
        boot_timeout: Duration::from_secs(600),
        cache_dir: Machine::default_cache_dir(),
        jobs: 1,
        progress: false,
    };
    let dir = tempfile::tempdir().unwrap();
    let keys = |range: std::ops::RangeInclusive<u64>| {
        range
            .map(|k| format!("insert:{k}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let chosen = std::env::var("PANGOLIN_COST_LIBRARIES").ok();
    let libraries: Vec<&Library> = LIBRARIES
        .iter()
        .filter(|lib| {
            chosen
                .as_ref()
                .is_none_or(|c| c.split(',').any(|n| n == lib.name))
        })
        .collect();
    assert!(
        !libraries.is_empty(),
        "PANGOLIN_COST_LIBRARIES names none of Pangolin, Pmemobj, Pmemobj-R"
    );
    eprintln!("map, library: per transaction user / kernel instructions, PM bytes stored");
    for map in ["btree", "ctree", "hashmap_tx"] {
        for lib in &libraries {
            let setup = format!(
                "{}{} {map} {} setup create {}\nsync",
                lib.prepare,
                lib.tool,
                lib.pool,
                keys(1..=10)
            );
            let run = format!("{} {map} {} run", lib.tool, lib.pool);
            let out = dir.path().join("counts");
            let full = count(
                &machine,
                &setup,
                &format!("{run} {}", keys(11..=10 + TXS)),
                &out,
            );
            // The same words parsed by the shell (`:` ignores them), so the difference is
            // the transactions alone: busybox sh costs ~3,350 instructions per word.
            let none = count(
                &machine,
                &setup,
                &format!("{run}; : {}", keys(11..=10 + TXS)),
                &out,
            );
            let per_tx = |f: fn(&Counts) -> u64| {
                let (a, b) = (f(&full), f(&none));
                assert!(a > b, "{map} {}: {TXS} transactions cost nothing", lib.name);
                (a - b) / TXS
            };
            let kernel =
                (full.kernel_instructions as i64 - none.kernel_instructions as i64) / TXS as i64;
            eprintln!(
                "{map}, {}: {} / {kernel} instructions, {} PM bytes",
                lib.name,
                per_tx(|c| c.user_instructions),
                per_tx(|c| c.pm_bytes_written),
            );
        }
    }
}
