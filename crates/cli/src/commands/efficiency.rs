//! `persim efficiency run`: CPU and energy cost per GiB written, with fio, on the host's
//! file systems (docs/guides/efficiency.md).

use crate::html;
use crate::vm_args::VmArgs;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use persim_efficiency::fio::FioJob;
use persim_efficiency::interrupt;
use persim_efficiency::numa;
use persim_efficiency::plots::series_svgs;
use persim_efficiency::power::PowerSource;
use persim_efficiency::powercap::POWERCAP_DIR;
use persim_efficiency::results::{table, Results};
use persim_efficiency::series::{self, Progress, SeriesOptions};
use persim_efficiency::target::TargetSpec;
use persim_tester::{
    guest_job, guest_profile_table, guest_svgs, guest_table, run_guest_series, GuestProgress,
    GuestSeriesOptions,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Measure what writing a GiB costs a storage stack (docs/guides/efficiency.md).
#[derive(Subcommand, Debug)]
pub enum EfficiencyCommand {
    Run(EfficiencyRunArgs),
}

/// Run fio on each target with 1..N jobs and measure bandwidth, CPU cost (system-wide CPU
/// seconds per GiB, from /proc/stat: user + system + irq + softirq of all CPUs) and energy
/// cost (joules above idle per GiB: (P_bench - P_idle) / bandwidth, average powers with
/// the first and last second cut).
///
/// The workload is the thesis' job: fio ioengine=sync rw=randwrite sync=1 bs=16k size=100M
/// (per job) time_based runtime=30 ramp_time=2; --fio-option changes any of it. Before each
/// target's series the idle system is measured; a busy one is refused (--allow-noise to
/// measure anyway). Each (target, jobs) result is saved in DIR/points as it completes: run
/// the same command again to resume an interrupted series. fio works in a directory of its
/// own on the target, removed afterwards (also on Ctrl-C). Writes DIR/results.txt,
/// DIR/results.json and DIR/{bandwidth,cpu-cost,energy-cost}.svg.
///
/// With --vm CONFIG (repeatable) instead of targets, fio runs inside Persim's guest on each
/// configuration's stack, and the plugin's counting mode counts guest instructions per GiB
/// (kernel and user apart) and the PM and NVMe bytes written per byte fio wrote (write
/// amplification): counts that hold on any host. The guest job writes a fixed amount
/// (ioengine=sync rw=randwrite sync=1 bs=16k size=4M per job) instead of running for a
/// time; each point boots its own guest. Writes DIR/guest-results.{txt,json} and plots
/// DIR/guest-instructions.svg and DIR/guest-write-amplification.svg.
///
/// Examples:
///   persim efficiency run /mnt/pmem-ext4:ext4 /mnt/nvme --jobs 1..8 --power rapl --out eff
///   persim efficiency run /dev/pmem0 /mnt/pmem-ext4:ext4 --numa-node 0 --out raw
///   persim efficiency run --vm vm/ext4-dax.toml --vm vm/xfs-dax.toml --jobs 1..4 --out eff
///   persim efficiency run --vm vm/pmem-raw.toml --vm-device /dev/pmem0 --jobs 1 --out raw
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct EfficiencyRunArgs {
    /// Directories on the file systems to measure; DIR:FSTYPE refuses DIR unless it is on
    /// a file system of that type (as /proc/self/mountinfo names it: ext4, xfs, tmpfs...).
    /// A block device (/dev/pmem0) or devdax device (/dev/dax0.0) is the raw baseline:
    /// fio overwrites it directly, so one holding a mounted file system is refused.
    #[arg(
        required_unless_present = "vms",
        conflicts_with = "vms",
        value_name = "TARGET"
    )]
    pub targets: Vec<String>,
    /// Run fio in Persim's guest on this VM configuration's stack instead (repeat for
    /// more stacks).
    #[arg(long = "vm", value_name = "CONFIG")]
    pub vms: Vec<PathBuf>,
    /// With --vm: fio writes this device of the guest directly (the raw baseline, e.g.
    /// /dev/pmem0 with vm/pmem-raw.toml) instead of a directory on the configuration's
    /// file system; refused when it holds a mounted file system.
    #[arg(long, requires = "vms", value_name = "DEVICE")]
    pub vm_device: Option<PathBuf>,
    /// Pin fio's jobs to this NUMA node's CPUs and memory (fio's numa_cpu_nodes and
    /// numa_mem_policy=bind), as the thesis measured: the node of the PM under test.
    #[arg(long, conflicts_with = "vms", value_name = "NODE")]
    pub numa_node: Option<u32>,
    /// With --vm: the guest's clock counts instructions (QEMU -icount shift=3, 8 ns each)
    /// instead of following the host's. Timer ticks then no longer grow with the host's
    /// load, so repeated counts agree; fio's times (its runtime and latencies) become
    /// guest-virtual time: the instructions run while fio waits, not host seconds. QEMU
    /// then runs the vCPUs in turn on one host thread.
    #[arg(long, requires = "vms")]
    pub icount: bool,
    /// With --vm: also count the kernel's instructions by function (a callback per kernel
    /// block: slower) and print them side by side, in thousands per write; kept in
    /// DIR/guest-profile.txt and each point's JSON.
    #[arg(long, requires = "vms")]
    pub profile: bool,
    /// With --vm: seconds the guest's fio may take.
    #[arg(long, default_value_t = 1800, value_name = "SECONDS")]
    pub timeout: u64,
    /// The numbers of fio jobs: a range (1..8) or a list (1,2,4,8).
    #[arg(long, default_value = "1..8", value_parser = parse_jobs)]
    pub jobs: JobCounts,
    /// Where power figures come from: rapl (package and DRAM through
    /// /sys/class/powercap, as root), meter:COMMAND (a program that prints watts, one number
    /// per line per sample, e.g. read from another host so that reading it costs this one
    /// nothing), or none (no energy columns).
    #[arg(long, default_value = "none", value_parser = parse_power)]
    pub power: PowerSource,
    /// A fio option KEY=VALUE replacing or adding to the default job (KEY= removes one),
    /// e.g. --fio-option bs=4k --fio-option rw=randrw --fio-option fsync=1 --fio-option
    /// sync=. Repeat it for more options.
    #[arg(long = "fio-option", value_name = "KEY=VALUE")]
    pub fio_options: Vec<String>,
    /// Seconds of idle baseline before each target's series.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub idle_seconds: f64,
    /// The idle system is quiet when at most this share of all CPUs' time is busy.
    #[arg(long, default_value_t = 5.0, value_name = "PERCENT")]
    pub quiet_limit: f64,
    /// Measure even when the idle system is not quiet (the figure is printed and kept).
    #[arg(long)]
    pub allow_noise: bool,
    /// The fio program.
    #[arg(long, default_value = "fio", value_name = "PROGRAM")]
    pub fio: String,
    /// Print results.json on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The output directory (an existing one with the same options is resumed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also write the results table and the plots as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `--jobs`: job counts in order.
#[derive(Clone, Debug)]
pub struct JobCounts(pub Vec<u32>);

fn parse_jobs(text: &str) -> Result<JobCounts, String> {
    let bad = || format!("`--jobs {text}`: give a range such as 1..8 or a list such as 1,2,4,8");
    let counts: Vec<u32> = match text.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (a.parse::<u32>(), b.trim_start_matches('=').parse::<u32>());
            let (Ok(a), Ok(b)) = (a, b) else {
                return Err(bad());
            };
            (a..=b).collect()
        }
        None => text
            .split(',')
            .map(|n| n.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?,
    };
    if counts.is_empty() || counts.contains(&0) {
        return Err(bad());
    }
    Ok(JobCounts(counts))
}

fn parse_power(text: &str) -> Result<PowerSource, String> {
    PowerSource::parse(text)
}

pub fn run(command: &EfficiencyCommand) -> Result<ExitCode> {
    let EfficiencyCommand::Run(args) = command;
    if !args.vms.is_empty() {
        return run_in_guest(args);
    }
    let mut fio_options = args.fio_options.clone();
    if let Some(node) = args.numa_node {
        fio_options.extend(
            numa::pin_options(Path::new(numa::NODE_DIR), node).map_err(anyhow::Error::msg)?,
        );
    }
    let job = FioJob::with_overrides(&fio_options).map_err(anyhow::Error::msg)?;
    if args.idle_seconds < 1.0 {
        bail!("--idle-seconds {}: give 1 or more", args.idle_seconds);
    }
    let options = SeriesOptions {
        targets: args.targets.iter().map(|t| TargetSpec::parse(t)).collect(),
        jobs: args.jobs.0.clone(),
        power: args.power.clone(),
        job,
        out: args.out.clone(),
        idle_seconds: args.idle_seconds,
        quiet_limit_percent: args.quiet_limit,
        allow_noise: args.allow_noise,
        fio: args.fio.clone(),
        powercap_root: PathBuf::from(POWERCAP_DIR),
    };
    if options.power == PowerSource::None {
        say!("power: none, so no energy figures");
    }
    let results = match series::run(&options, &mut print_progress) {
        Ok(results) => results,
        Err(_) if interrupt::interrupted() => {
            say!(
                "interrupted: fio stopped and its files removed; the completed runs are in {}, \
                 run the same command to resume",
                args.out.display()
            );
            return Ok(ExitCode::from(130));
        }
        Err(e) => bail!("{e}"),
    };
    print_results(&results, args.json)?;
    if let Some(file) = &args.html {
        let svgs = series_svgs(&results.points).map_err(anyhow::Error::msg)?;
        let page = html::plots_page("What writing a GiB costs", &table(&results), &svgs);
        html::write(file, &page)?;
    }
    say!("results: {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

fn run_in_guest(args: &EfficiencyRunArgs) -> Result<ExitCode> {
    let job = guest_job(&args.fio_options).map_err(anyhow::Error::msg)?;
    let machines = args
        .vms
        .iter()
        .map(|vm| {
            VmArgs {
                fs: None,
                vm: Some(vm.clone()),
                timeout: args.timeout,
                // a guest whose clock counts instructions boots slower (each translated
                // block counts its instructions; one host thread)
                boot_timeout: if args.icount { 900 } else { 300 },
                guest_tools: None,
                home: None,
            }
            .machine(Some(1), false)
        })
        .collect::<Result<Vec<_>>>()?;
    let options = GuestSeriesOptions {
        machines,
        jobs: args.jobs.0.clone(),
        job,
        device: args.vm_device.clone(),
        icount: args.icount,
        profile: args.profile,
        out: args.out.clone(),
    };
    let results = run_guest_series(&options, &mut |p| match p {
        GuestProgress::Running(stack, jobs) => {
            say!("{stack}: fio with {jobs} job(s) in the guest...")
        }
        GuestProgress::Resumed(p) => say!("{}: {} job(s) done earlier, kept", p.stack, p.jobs),
        GuestProgress::Done(p) => say!(
            "{}: {} job(s): {:.3e} guest instructions/GiB, PM x{:.2}, NVMe x{:.2} ({:.0} s)",
            p.stack,
            p.jobs,
            p.kernel_instructions_per_gib + p.user_instructions_per_gib,
            p.pm_amplification,
            p.nvme_amplification,
            p.host_seconds
        ),
    })
    .map_err(anyhow::Error::msg)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&results)?)?;
    } else {
        out!("{}", guest_table(&results))?;
        if let Some(table) = guest_profile_table(&results.points) {
            out!("\n{table}")?;
        }
    }
    if let Some(file) = &args.html {
        let svgs = guest_svgs(&results.points).map_err(anyhow::Error::msg)?;
        let page = html::plots_page(
            "What writing a GiB costs in the guest",
            &guest_table(&results),
            &svgs,
        );
        html::write(file, &page)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_results(results: &Results, json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(results)?)?;
    } else {
        out!("{}", table(results))?;
    }
    Ok(())
}

fn print_progress(p: Progress) {
    match p {
        Progress::Idle(t, idle) => say!(
            "{}: idle baseline {:.1} % busy over {:.0} s{}",
            t.label,
            idle.busy_percent,
            idle.seconds,
            idle.watts.map_or(String::new(), |w| format!(", {w:.1} W"))
        ),
        Progress::Noisy(t, idle) => say!(
            "warning: {}: the idle system is not quiet ({:.1} % busy over {:.0} s); measuring \
             anyway (--allow-noise)",
            t.label,
            idle.busy_percent,
            idle.seconds
        ),
        Progress::Running(t, jobs) => say!("{}: fio with {jobs} job(s)...", t.label),
        Progress::Resumed(p) => say!("{}: {} job(s) done earlier, kept", p.target.label, p.jobs),
        Progress::Done(p) => say!(
            "{}: {} job(s): {:.1} MiB/s, {:.3} CPU s/GiB",
            p.target.label,
            p.jobs,
            p.bandwidth_mib_s,
            p.cpu_s_per_gib
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_counts() {
        assert_eq!(parse_jobs("1..4").unwrap().0, [1, 2, 3, 4]);
        assert_eq!(parse_jobs("1..=2").unwrap().0, [1, 2]);
        assert_eq!(parse_jobs("1,2,8").unwrap().0, [1, 2, 8]);
        assert!(parse_jobs("0..2").is_err());
        assert!(parse_jobs("4..1").is_err());
        assert!(parse_jobs("many").is_err());
    }
}
