//! `persim efficiency run` on the host: per target an idle baseline and quiet-system
//! check, then fio with each job count, measured and saved as each run completes.

use crate::fio::{self, FioJob};
use crate::fio_run::{self, WorkDir};
use crate::machine_info::MachineInfo;
use crate::power::{Power, PowerSource};
use crate::results::{Idle, OutDir, Point, Results, Settings};
use crate::sampling::{self, Sampler};
use crate::target::{self, Target, TargetSpec};
use crate::{interrupt, target::parse_size};
use std::path::PathBuf;
use std::time::Instant;

pub struct SeriesOptions {
    pub targets: Vec<TargetSpec>,
    pub jobs: Vec<u32>,
    pub power: PowerSource,
    pub job: FioJob,
    pub out: PathBuf,
    /// How long the idle baseline is measured.
    pub idle_seconds: f64,
    /// The busy share of all CPUs above which the idle system is not quiet, percent.
    pub quiet_limit_percent: f64,
    /// Warn instead of refusing when the system is not quiet.
    pub allow_noise: bool,
    /// The fio program.
    pub fio: String,
    /// Where the RAPL zones are (`/sys/class/powercap`).
    pub powercap_root: PathBuf,
}

/// What the series tells its user as it goes.
pub enum Progress<'a> {
    Idle(&'a Target, &'a Idle),
    /// Not quiet, but `allow_noise`.
    Noisy(&'a Target, &'a Idle),
    Running(&'a Target, u32),
    Resumed(&'a Point),
    Done(&'a Point),
}

/// Runs the series; the points of an earlier, interrupted run of it are kept, not run
/// again. Ctrl-C stops fio, removes its files and returns an error (see
/// [`interrupt::interrupted`]).
pub fn run(options: &SeriesOptions, progress: &mut dyn FnMut(Progress)) -> Result<Results, String> {
    interrupt::catch();
    let fio_version = fio::version(&options.fio)?;
    let size = options.job.get("size").and_then(parse_size).unwrap_or(0);
    let max_jobs = options.jobs.iter().copied().max().unwrap_or(1);
    let targets: Vec<Target> = options
        .targets
        .iter()
        .map(|t| target::check(t, size * u64::from(max_jobs)))
        .collect::<Result<_, _>>()?;
    let out = OutDir::new(&options.out)?;
    let settings = Settings {
        job: options.job.clone(),
        power: options.power.name(),
    };
    out.settings(&settings)?;
    let clock = Instant::now();
    let mut power = Power::start(&options.power, &options.powercap_root, clock)?;
    let mut results = Results {
        machine: MachineInfo::this_machine(&fio_version),
        settings,
        points: Vec::new(),
    };
    for target in &targets {
        let todo: Vec<u32> = options
            .jobs
            .iter()
            .copied()
            .filter(|&jobs| match out.done(target, jobs) {
                Some(point) => {
                    progress(Progress::Resumed(&point));
                    results.points.push(point);
                    false
                }
                None => true,
            })
            .collect();
        if todo.is_empty() {
            continue;
        }
        let idle = idle_baseline(options, &mut power, clock)?;
        if idle.busy_percent > options.quiet_limit_percent {
            if !options.allow_noise {
                return Err(format!(
                    "the system is not quiet: {:.1} % of all CPUs' time was busy over {:.0} s \
                     of idle baseline before {} (limit {:.1} %); stop what runs, or pass \
                     --allow-noise to measure anyway",
                    idle.busy_percent, idle.seconds, target.label, options.quiet_limit_percent
                ));
            }
            progress(Progress::Noisy(target, &idle));
        } else {
            progress(Progress::Idle(target, &idle));
        }
        for jobs in todo {
            progress(Progress::Running(target, jobs));
            let (point, json) = measure(options, &mut power, clock, target, jobs, &idle)?;
            out.save(&point, &json)?;
            progress(Progress::Done(&point));
            results.points.push(point);
            out.write(&results)?;
        }
    }
    out.write(&results)?;
    Ok(results)
}

fn idle_baseline(
    options: &SeriesOptions,
    power: &mut Power,
    clock: Instant,
) -> Result<Idle, String> {
    let sampler = Sampler::start(power, clock);
    let start = clock.elapsed().as_secs_f64();
    let deadline = start + options.idle_seconds;
    while clock.elapsed().as_secs_f64() < deadline {
        if interrupt::interrupted() {
            return Err("interrupted".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let samples = sampler.stop();
    let end = clock.elapsed().as_secs_f64();
    let w = sampling::window(&samples, power, start, end)
        .ok_or("the idle baseline is too short: give --idle-seconds 1 or more")?;
    let watts = match power {
        Power::Meter(meter) => Some(meter.average(start, end)?),
        _ => w.watts,
    };
    Ok(Idle {
        seconds: w.seconds,
        busy_percent: w.busy_percent,
        cpu_rate: w.cpu_rate,
        watts,
    })
}

fn measure(
    options: &SeriesOptions,
    power: &mut Power,
    clock: Instant,
    target: &Target,
    jobs: u32,
    idle: &Idle,
) -> Result<(Point, String), String> {
    // a device has no files to lay out, and no directory to put them in
    let work = match target.raw {
        false => Some(WorkDir::create(&target.dir)?),
        true => None,
    };
    if let Some(work) = &work {
        fio_run::lay_out(&options.fio, &options.job, jobs, work.path())?;
    }
    let args = options.job.args(
        jobs,
        target.place(work.as_ref().map_or(&target.dir, |w| w.path())),
    );
    let sampler = Sampler::start(power, clock);
    let start = clock.elapsed().as_secs_f64();
    let output = fio_run::run(&options.fio, &args);
    let end = clock.elapsed().as_secs_f64();
    let samples = sampler.stop();
    drop(work);
    let output = output?;
    // fio measures after its ramp; of that, the first and last second are cut.
    let measured = start + options.job.ramp_seconds();
    let (window, trimmed) = match sampling::window(&samples, power, measured + 1.0, end - 1.0) {
        Some(w) => (w, true),
        None => (
            sampling::window(&samples, power, measured, end)
                .ok_or("fio ran too briefly to be measured; give a longer runtime")?,
            false,
        ),
    };
    let (from, to) = if trimmed {
        (measured + 1.0, end - 1.0)
    } else {
        (measured, end)
    };
    let watts = match power {
        Power::Meter(meter) => Some(meter.average(from, to)?),
        _ => window.watts,
    };
    let mut point = Point {
        target: target.clone(),
        jobs,
        fio: output.result,
        window_s: window.seconds,
        trimmed,
        cpu_rate: window.cpu_rate,
        busy_percent: window.busy_percent,
        idle: idle.clone(),
        watts,
        missing_zones: window.missing_zones,
        bandwidth_mib_s: 0.0,
        cpu_s_per_gib: 0.0,
        joules_per_gib: None,
    };
    point.cost();
    Ok((point, output.json))
}
