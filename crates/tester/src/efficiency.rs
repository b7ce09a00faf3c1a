//! `persim efficiency run --vm CONFIG`: fio inside Persim's guest, counted by the plugin's
//! counting mode (docs/guides/efficiency.md): guest instructions per GiB written (kernel and user
//! apart) and the PM and NVMe bytes written per byte fio wrote (write amplification).
//! These counts are the same on any host; the guest's CPU time under TCG is not, and is
//! shown only beside them.

mod profile;

pub use profile::FunctionCost;

use persim_abi::Counts;
use persim_efficiency::cpu_time::{ticks_per_second, CpuTimes};
use persim_efficiency::fio::{self, FioJob, FioResult, Place};
use persim_efficiency::plots::{plot, LinePoint};
use persim_trace::atomic_file::write_atomically;
use persim_vm::{Machine, RecordOptions, TracingVm};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const GIB: f64 = (1u64 << 30) as f64;
/// Where fio's files go in the guest, on the file system under test.
const GUEST_DIR: &str = "/mnt/persim-efficiency";
/// Where the guest's fio writes its JSON output: the initramfs, not the measured stack.
const GUEST_JSON: &str = "/fio.json";
const JSON_MARK: &str = "@@persim-fio-json@@";
/// The least guest RAM a guest series runs with.
const GUEST_MEMORY_MIB: u64 = 1024;

/// The guest's default job: the thesis' 16 KiB synchronous random writes, but a fixed
/// amount per job instead of a time, so the counts do not depend on the host's speed,
/// and small, because TCG is slow.
pub const GUEST_JOB: [(&str, &str); 5] = [
    ("ioengine", "sync"),
    ("rw", "randwrite"),
    ("sync", "1"),
    ("bs", "16k"),
    ("size", "4M"),
];

/// The guest job with `overrides` (as `--fio-option` gives them).
pub fn guest_job(overrides: &[String]) -> Result<FioJob, String> {
    let base = FioJob(
        GUEST_JOB
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    // the host's defaults removed, then the guest's put back before the user's
    let mut reset: Vec<String> = fio::DEFAULT_JOB
        .iter()
        .map(|(k, _)| format!("{k}="))
        .collect();
    reset.extend(base.0.iter().map(|(k, v)| format!("{k}={v}")));
    reset.extend(overrides.iter().cloned());
    FioJob::with_overrides(&reset)
}

pub struct GuestSeriesOptions {
    /// One machine per stack (its VM configuration).
    pub machines: Vec<Machine>,
    pub jobs: Vec<u32>,
    pub job: FioJob,
    /// fio writes this device of the guest directly instead of a directory on the stack's
    /// file system (the raw baseline).
    pub device: Option<PathBuf>,
    /// Guest time counts instructions (QEMU `-icount`), so that timer ticks do not grow
    /// with the host's load and fio's times are guest-virtual ones.
    pub icount: bool,
    /// Count the kernel's instructions by function too (the plugin's `profile=on`).
    pub profile: bool,
    pub out: PathBuf,
}

/// One fio run in the guest and its counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuestPoint {
    /// The VM configuration's name.
    pub stack: String,
    pub jobs: u32,
    /// The guest's virtual CPUs: as many as jobs, up to [`MAX_GUEST_CPUS`], so that
    /// jobs run at once and contend for the stack's locks as on a real machine.
    #[serde(default)]
    pub cpus: u32,
    /// Guest time counted instructions (`--icount`).
    #[serde(default)]
    pub icount: bool,
    pub fio: FioResult,
    pub counts: CountsRecord,
    /// Bytes fio wrote (its `io_bytes`), the denominator of every per-GiB figure.
    pub app_bytes: u64,
    pub kernel_instructions_per_gib: f64,
    pub user_instructions_per_gib: f64,
    /// Guest instructions (kernel and user) per write fio issued.
    pub instructions_per_write: f64,
    /// PM bytes written per byte fio wrote.
    pub pm_amplification: f64,
    /// NVMe bytes written per byte fio wrote.
    pub nvme_amplification: f64,
    /// The guest's busy CPU seconds per GiB (its /proc/stat): under TCG meaningless in
    /// absolute terms.
    pub guest_cpu_s_per_gib: f64,
    /// Host seconds the counted run took (TCG's speed, not the stack's).
    pub host_seconds: f64,
    /// With `--profile`: the kernel functions that executed the most instructions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_functions: Vec<FunctionCost>,
}

/// [`Counts`] as results.json holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountsRecord {
    pub kernel_instructions: u64,
    pub user_instructions: u64,
    pub pm_bytes_written: u64,
    pub nvme_bytes_written: u64,
}

impl From<Counts> for CountsRecord {
    fn from(c: Counts) -> CountsRecord {
        CountsRecord {
            kernel_instructions: c.kernel_instructions,
            user_instructions: c.user_instructions,
            pm_bytes_written: c.pm_bytes_written,
            nvme_bytes_written: c.nvme_bytes_written,
        }
    }
}

/// The guest series' results (`DIR/guest-results.json`, beside it `guest-results.txt`,
/// `guest-instructions.svg` and `guest-write-amplification.svg`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuestResults {
    pub job: FioJob,
    /// The device fio wrote directly, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<PathBuf>,
    pub points: Vec<GuestPoint>,
}

pub enum GuestProgress<'a> {
    Running(&'a str, u32),
    Resumed(&'a GuestPoint),
    Done(&'a GuestPoint),
}

/// The most virtual CPUs a guest of the series gets (TCG runs each on a host thread).
pub const MAX_GUEST_CPUS: u32 = 4;

/// The virtual CPUs of the guest that runs `jobs` fio jobs.
pub fn guest_cpus(jobs: u32) -> u32 {
    jobs.clamp(1, MAX_GUEST_CPUS)
}

/// Runs fio in each stack's guest with each job count; a point saved by an earlier run
/// is kept. Each point boots its own guest (a blank PM and disk).
pub fn run_guest_series(
    options: &GuestSeriesOptions,
    progress: &mut dyn FnMut(GuestProgress),
) -> Result<GuestResults, String> {
    let points_dir = options.out.join("guest-points");
    std::fs::create_dir_all(&points_dir)
        .map_err(|e| format!("cannot create {}: {e}", points_dir.display()))?;
    let settings = options.out.join("guest-series.json");
    // the fio options, and the device and the guest's clock when they are not the defaults
    let job_json = match (&options.device, options.icount) {
        (None, false) => serde_json::to_string_pretty(&options.job),
        (device, icount) => serde_json::to_string_pretty(
            &serde_json::json!({ "job": options.job, "device": device, "icount": icount }),
        ),
    }
    .map_err(|e| e.to_string())?;
    match std::fs::read_to_string(&settings) {
        Ok(earlier) if earlier != job_json => {
            return Err(format!(
                "{} holds a guest series with other fio options or another --vm-device; give \
                 another --out, or the same options to resume it",
                options.out.display()
            ))
        }
        Ok(_) => {}
        Err(_) => write_atomically(&settings, job_json.as_bytes()).map_err(|e| e.to_string())?,
    }
    let mut results = GuestResults {
        job: options.job.clone(),
        device: options.device.clone(),
        points: Vec::new(),
    };
    for machine in &options.machines {
        let stack = machine.config.name.clone();
        for &jobs in &options.jobs {
            let cpus = guest_cpus(jobs);
            let path = points_dir.join(format!("{stack}.jobs-{jobs}.json"));
            if let Some(point) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<GuestPoint>(&t).ok())
                .filter(|p| p.cpus == cpus && p.icount == options.icount)
                .filter(|p| !options.profile || !p.kernel_functions.is_empty())
            {
                progress(GuestProgress::Resumed(&point));
                results.points.push(point);
                continue;
            }
            progress(GuestProgress::Running(&stack, jobs));
            let counts = path.with_extension("counts");
            let point = measure(machine, options, jobs, cpus, &counts)?;
            let text = serde_json::to_string_pretty(&point).map_err(|e| e.to_string())?;
            write_atomically(&path, text.as_bytes()).map_err(|e| e.to_string())?;
            progress(GuestProgress::Done(&point));
            results.points.push(point);
            write_results(&options.out, &results)?;
        }
    }
    write_results(&options.out, &results)?;
    Ok(results)
}

fn measure(
    machine: &Machine,
    options: &GuestSeriesOptions,
    jobs: u32,
    cpus: u32,
    counts_path: &Path,
) -> Result<GuestPoint, String> {
    let mut machine = machine.clone();
    if !machine.config.tools.iter().any(|t| t == "fio") {
        machine.config.tools.push("fio".into());
    }
    // fio's shared libraries (~80 MiB) are in the initramfs, which lives in the guest's
    // RAM: with 512 MiB, XFS-DAX's guest ran out of space for its commands.
    machine.config.memory_mib = machine.config.memory_mib.max(GUEST_MEMORY_MIB);
    let job = &options.job;
    let place = match &options.device {
        Some(device) => Place::Device(device),
        None => Place::Directory(Path::new(GUEST_DIR)),
    };
    let args = |extra: &[&str]| -> String {
        let mut a = job.args(jobs, place);
        a.extend(extra.iter().map(|s| s.to_string()));
        a.iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let setup = match &options.device {
        // fio would overwrite the file system: the same refusal as on the host
        Some(device) => format!(
            "if grep -q '^{0} ' /proc/mounts; then echo '{0} holds a mounted file system: \
             fio would overwrite it; give a configuration that leaves it unmounted \
             (vm/pmem-raw.toml)'; exit 1; fi",
            device.display()
        ),
        // Files laid out before counting starts, and made durable.
        None => format!(
            "mkdir -p {GUEST_DIR} && fio {} >/dev/null && sync",
            args(&["--create_only=1"])
        ),
    };
    let command = format!(
        "head -n 1 /proc/stat; fio {} --output={GUEST_JSON} >/dev/null; rc=$?; \
         head -n 1 /proc/stat; echo {JSON_MARK}; cat {GUEST_JSON}; exit $rc",
        args(&[])
    );
    let record = RecordOptions {
        profile: options.profile,
        ..record_options(cpus, options.icount)
    };
    let mut vm = TracingVm::new(&machine, record).map_err(|e| e.to_string())?;
    let summary = vm
        .record(&setup, &command, counts_path)
        .map_err(|e| format!("{}: {e}", machine.config.name))?;
    let _ = vm.shutdown();
    if summary.exit_code != 0 {
        return Err(format!(
            "{}: fio failed in the guest (exit code {}): {}",
            machine.config.name, summary.exit_code, summary.output
        ));
    }
    let (cpu_before, cpu_after, json) = split_output(&summary.output)?;
    let fio = fio::parse_output(json)?;
    let counts_text = std::fs::read_to_string(counts_path).map_err(|e| {
        format!(
            "the plugin wrote no counts to {}: {e}",
            counts_path.display()
        )
    })?;
    let counts = Counts::parse(&counts_text)?;
    let app_bytes = fio.bytes_written + fio.bytes_read;
    let gib = app_bytes as f64 / GIB;
    let per_gib = |v: f64| if gib > 0.0 { v / gib } else { 0.0 };
    let per_byte = |v: u64| {
        if app_bytes > 0 {
            v as f64 / app_bytes as f64
        } else {
            0.0
        }
    };
    let writes = fio.writes.max(1) as f64;
    let kernel_functions = match counts.kernel_blocks.is_empty() {
        true => Vec::new(),
        false => {
            let path = persim_trace::Recording::new(counts_path).symbols();
            let symbols = persim_trace::Symbols::load(&path)
                .map_err(|e| format!("the guest's symbols, {}: {e}", path.display()))?;
            profile::by_function(&counts.kernel_blocks, &symbols, writes)
        }
    };
    let ticks = cpu_after.since(&cpu_before);
    Ok(GuestPoint {
        stack: machine.config.name.clone(),
        jobs,
        cpus,
        icount: options.icount,
        app_bytes,
        kernel_instructions_per_gib: per_gib(counts.kernel_instructions as f64),
        user_instructions_per_gib: per_gib(counts.user_instructions as f64),
        instructions_per_write: (counts.kernel_instructions + counts.user_instructions) as f64
            / writes,
        pm_amplification: per_byte(counts.pm_bytes_written),
        nvme_amplification: per_byte(counts.nvme_bytes_written),
        guest_cpu_s_per_gib: per_gib(ticks.busy as f64 / ticks_per_second()),
        host_seconds: summary.traced.as_secs_f64(),
        kernel_functions,
        counts: counts.into(),
        fio,
    })
}

/// A counting guest's recording: `cpus` vCPUs, its time counting instructions with
/// `icount` (the vm crate's reproducible mode, QEMU `-icount`).
fn record_options(cpus: u32, icount: bool) -> RecordOptions {
    RecordOptions {
        count: true,
        cpus,
        reproducible: icount,
        ..RecordOptions::default()
    }
}

/// The guest's /proc/stat before and after fio, and fio's JSON, from the run's output.
fn split_output(output: &str) -> Result<(CpuTimes, CpuTimes, &str), String> {
    let (head, json) = output
        .split_once(JSON_MARK)
        .ok_or_else(|| format!("the guest printed no fio output: {output}"))?;
    let stats: Vec<&str> = head
        .lines()
        .filter(|l| l.split_whitespace().next() == Some("cpu"))
        .collect();
    let [before, after] = stats[..] else {
        return Err(format!("the guest printed no /proc/stat lines: {head}"));
    };
    Ok((
        CpuTimes::parse(before)?,
        CpuTimes::parse(after)?,
        json.trim(),
    ))
}

fn write_results(out: &Path, results: &GuestResults) -> Result<(), String> {
    let json = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    write_atomically(&out.join("guest-results.json"), json.as_bytes())
        .map_err(|e| e.to_string())?;
    write_atomically(
        &out.join("guest-results.txt"),
        guest_table(results).as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    if let Some(table) = guest_profile_table(&results.points) {
        write_atomically(&out.join("guest-profile.txt"), table.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    for (name, svg) in guest_svgs(&results.points)? {
        write_atomically(&out.join(name), svg.as_bytes()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The guest series' plots over jobs, a line per stack: instructions per GiB (kernel and
/// user), and PM and NVMe bytes per byte written (NVMe lines only for stacks with an SSD
/// written).
pub fn guest_svgs(points: &[GuestPoint]) -> Result<Vec<(&'static str, String)>, String> {
    let instructions: Vec<LinePoint> = points
        .iter()
        .map(|p| {
            let total = p.kernel_instructions_per_gib + p.user_instructions_per_gib;
            (p.stack.as_str(), p.jobs, total)
        })
        .collect();
    let labels: Vec<(String, String)> = points
        .iter()
        .map(|p| (format!("{} PM", p.stack), format!("{} NVMe", p.stack)))
        .collect();
    let mut amplification: Vec<LinePoint> = Vec::new();
    for (p, (pm, nvme)) in points.iter().zip(&labels) {
        amplification.push((pm, p.jobs, p.pm_amplification));
        let ssd = points
            .iter()
            .any(|q| q.stack == p.stack && q.counts.nvme_bytes_written > 0);
        if ssd {
            amplification.push((nvme, p.jobs, p.nvme_amplification));
        }
    }
    Ok(vec![
        (
            "guest-instructions.svg",
            plot(
                &instructions,
                "Guest instructions per GiB written (kernel + user)",
                "instructions/GiB",
            )?,
        ),
        (
            "guest-write-amplification.svg",
            plot(
                &amplification,
                "Write amplification: bytes to the media per byte written",
                "bytes/byte",
            )?,
        ),
    ])
}

/// The profiled points' kernel functions side by side (`None`: no point was profiled).
pub fn guest_profile_table(points: &[GuestPoint]) -> Option<String> {
    profile::table(points)
}

/// The guest series as a table.
pub fn guest_table(results: &GuestResults) -> String {
    let job: Vec<String> = results
        .job
        .0
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let device = results.device.as_ref().map_or(String::new(), |d| {
        format!(", writing {} directly", d.display())
    });
    let clock = match results.points.iter().any(|p| p.icount) {
        true => ", guest time counting instructions: fio's times are guest-virtual",
        false => "",
    };
    let mut out = format!(
        "fio in Persim's guest (TCG, as many vCPUs as jobs, up to {MAX_GUEST_CPUS}{device}{clock}): {}\n\
         Instructions and bytes are counted by the plugin and hold on any host; guest CPU \
         s/GiB is TCG's, meaningless in absolute terms.\n\n",
        job.join(" ")
    );
    let _ = writeln!(
        out,
        "{:<18} {:>4} {:>9} {:>13} {:>13} {:>11} {:>7} {:>7} {:>12} {:>8} {:>9} {:>9} {:>9}",
        "stack",
        "jobs",
        "MiB",
        "kernel ins/GiB",
        "user ins/GiB",
        "ins/write",
        "PM ampl",
        "NVMe ampl",
        "guest s/GiB",
        "host s",
        "clat µs",
        "p99 µs",
        "sync µs"
    );
    // fio's latencies, in the guest's time; `-` where fio had none
    let us = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
    for p in &results.points {
        let clat = p.fio.write_clat.as_ref();
        let _ = writeln!(
            out,
            "{:<18} {:>4} {:>9.1} {:>13.3e} {:>13.3e} {:>11.0} {:>7.2} {:>7.2} {:>12.1} {:>8.1} {:>9} {:>9} {:>9}",
            p.stack,
            p.jobs,
            p.app_bytes as f64 / (1 << 20) as f64,
            p.kernel_instructions_per_gib,
            p.user_instructions_per_gib,
            p.instructions_per_write,
            p.pm_amplification,
            p.nvme_amplification,
            p.guest_cpu_s_per_gib,
            p.host_seconds,
            us(clat.map(|l| l.mean_us)),
            us(clat.and_then(|l| l.p99_us)),
            us(p.fio.sync_lat.as_ref().map(|l| l.mean_us))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_efficiency::fio::Latency;

    #[test]
    fn a_guest_has_as_many_vcpus_as_jobs_up_to_four() {
        let cpus: Vec<u32> = [1, 2, 3, 4, 8].into_iter().map(guest_cpus).collect();
        assert_eq!(cpus, [1, 2, 3, 4, 4]);
    }

    #[test]
    fn the_guest_job_has_no_time_and_takes_overrides() {
        let job = guest_job(&["bs=4k".into(), "fsync=1".into()]).unwrap();
        assert_eq!(job.get("time_based"), None);
        assert_eq!(job.get("runtime"), None);
        assert_eq!(job.get("ramp_time"), None);
        assert_eq!(job.get("size"), Some("4M"));
        assert_eq!(job.get("bs"), Some("4k"));
        assert_eq!(job.get("fsync"), Some("1"));
    }

    pub(super) fn point(stack: &str, jobs: u32, nvme_bytes: u64) -> GuestPoint {
        GuestPoint {
            stack: stack.into(),
            jobs,
            cpus: 2,
            icount: false,
            kernel_functions: Vec::new(),
            fio: FioResult {
                fio_version: "fio-3.33".into(),
                jobs,
                bytes_written: 1 << 20,
                bytes_read: 0,
                runtime_s: 1.0,
                write_iops: 64.0,
                writes: 64,
                write_clat: Some(Latency {
                    mean_us: 12.5,
                    p50_us: Some(10.0),
                    p99_us: None,
                }),
                sync_lat: None,
            },
            counts: CountsRecord {
                kernel_instructions: 1,
                user_instructions: 1,
                pm_bytes_written: 1 << 21,
                nvme_bytes_written: nvme_bytes,
            },
            app_bytes: 1 << 20,
            kernel_instructions_per_gib: 3e10,
            user_instructions_per_gib: 1e10,
            instructions_per_write: 1e5,
            pm_amplification: 2.0,
            nvme_amplification: nvme_bytes as f64 / (1 << 20) as f64,
            guest_cpu_s_per_gib: 1.0,
            host_seconds: 1.0,
        }
    }

    #[test]
    fn the_plots_have_a_line_per_stack_and_nvme_lines_only_for_an_ssd() {
        let points = [
            point("ext4-dax", 1, 0),
            point("ext4-dax", 2, 0),
            point("ext4-nvme", 1, 0),
            point("ext4-nvme", 2, 1 << 21),
        ];
        let svgs = guest_svgs(&points).unwrap();
        let names: Vec<&str> = svgs.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["guest-instructions.svg", "guest-write-amplification.svg"]
        );
        let (instructions, amplification) = (&svgs[0].1, &svgs[1].1);
        assert!(instructions.contains("ext4-dax") && instructions.contains("ext4-nvme"));
        assert!(amplification.contains("ext4-dax PM"), "{amplification}");
        assert!(amplification.contains("ext4-nvme NVMe"));
        assert!(!amplification.contains("ext4-dax NVMe"));
    }

    /// `--icount` reaches the recording as its reproducible mode, which is what gives
    /// QEMU `-icount` (persim_vm's TracingVm); without it guest time follows the host's.
    #[test]
    fn icount_makes_the_counting_guest_reproducible() {
        let counted = record_options(2, true);
        assert!(counted.count && counted.reproducible, "{counted:?}");
        assert_eq!(counted.cpus, 2);
        assert!(!record_options(1, false).reproducible);
    }

    /// fio's write latency per point, `-` for what fio did not report.
    #[test]
    fn the_table_gives_fios_latencies() {
        let results = GuestResults {
            job: guest_job(&[]).unwrap(),
            device: None,
            points: vec![point("ext4-dax", 1, 0)],
        };
        let table = guest_table(&results);
        let row = table.lines().last().unwrap();
        assert!(table.contains("clat µs"), "{table}");
        assert!(row.ends_with("12.5         -         -"), "{row}");
    }

    #[test]
    fn the_output_gives_two_stat_lines_and_the_json() {
        let out = "cpu  1 0 2 3 0 0 0 0 0 0\r\ncpu  5 0 4 3 0 0 0 0 0 0\r\n@@persim-fio-json@@\r\n{\"jobs\":[]}\r\n";
        let (a, b, json) = split_output(out).unwrap();
        assert_eq!(b.since(&a).busy, 6);
        assert_eq!(json, "{\"jobs\":[]}");
        assert!(split_output("no marker").is_err());
    }
}
