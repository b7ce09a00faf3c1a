//! A series' results: one [`Point`] per (target, jobs), the series' settings and machine,
//! and their files in the output directory (`series.json`, `points/*.json`,
//! `results.json`, `results.txt`, the plots). The one owner of those paths.

use crate::fio::{FioJob, FioResult};
use crate::machine_info::MachineInfo;
use crate::plots;
use crate::target::Target;
use persim_trace::atomic_file::write_atomically;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const GIB: f64 = (1u64 << 30) as f64;

/// What must be the same for the points of one output directory to be comparable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub job: FioJob,
    /// `--power` as given.
    pub power: String,
}

/// The idle baseline taken before a target's series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Idle {
    pub seconds: f64,
    /// Busy share of all CPUs, percent.
    pub busy_percent: f64,
    /// Busy CPU seconds per second.
    pub cpu_rate: f64,
    pub watts: Option<f64>,
}

/// One fio run on one target with one job count, and what it cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub target: Target,
    pub jobs: u32,
    pub fio: FioResult,
    /// The window CPU time and power were averaged over (fio's measured time without its
    /// first and last second), seconds.
    pub window_s: f64,
    /// Whether the first and last second could be cut (runs shorter than 3 s cannot).
    pub trimmed: bool,
    /// Busy CPU seconds per second during the window, all CPUs (the thesis' T / t).
    pub cpu_rate: f64,
    pub busy_percent: f64,
    pub idle: Idle,
    /// Average power during the window.
    pub watts: Option<f64>,
    /// RAPL zones that could not be read (not counted in `watts`).
    pub missing_zones: Vec<String>,
    pub bandwidth_mib_s: f64,
    /// CPU cost: system-wide CPU seconds per GiB written (or read).
    pub cpu_s_per_gib: f64,
    /// Energy cost: joules above idle per GiB.
    pub joules_per_gib: Option<f64>,
}

impl Point {
    /// The costs from the rates: CPU seconds per second and watts above idle, divided by
    /// GiB per second.
    pub fn cost(&mut self) {
        let gib_per_s = self.fio.bandwidth() / GIB;
        self.bandwidth_mib_s = self.fio.bandwidth() / (1 << 20) as f64;
        let per_gib = |rate: f64| {
            if gib_per_s > 0.0 {
                rate / gib_per_s
            } else {
                0.0
            }
        };
        self.cpu_s_per_gib = per_gib(self.cpu_rate);
        self.joules_per_gib = match (self.watts, self.idle.watts) {
            (Some(bench), Some(idle)) => Some(per_gib(bench - idle)),
            _ => None,
        };
    }
}

/// The whole series as `results.json` holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub machine: MachineInfo,
    pub settings: Settings,
    pub points: Vec<Point>,
}

/// The output directory's files.
pub struct OutDir(PathBuf);

impl OutDir {
    pub fn new(dir: &Path) -> Result<OutDir, String> {
        std::fs::create_dir_all(dir.join("points"))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(OutDir(dir.to_owned()))
    }

    /// Records the settings, or checks them against those of the series being resumed.
    pub fn settings(&self, settings: &Settings) -> Result<(), String> {
        let path = self.0.join("series.json");
        if let Ok(text) = std::fs::read_to_string(&path) {
            let earlier: Settings = serde_json::from_str(&text)
                .map_err(|e| format!("{} is damaged ({e}); remove it", path.display()))?;
            if earlier != *settings {
                return Err(format!(
                    "{} holds a series with other fio options or power source ({}); give \
                     another --out, or the same options to resume it",
                    self.0.display(),
                    path.display()
                ));
            }
            return Ok(());
        }
        write_json(&path, settings)
    }

    fn point_path(&self, target: &Target, jobs: u32) -> PathBuf {
        let name: String = target
            .label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.0
            .join("points")
            .join(format!("{name}.jobs-{jobs}.json"))
    }

    /// The point of an earlier, interrupted run of the series.
    pub fn done(&self, target: &Target, jobs: u32) -> Option<Point> {
        let text = std::fs::read_to_string(self.point_path(target, jobs)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Saves a point as it completes, with fio's output beside it.
    pub fn save(&self, point: &Point, fio_json: &str) -> Result<(), String> {
        let path = self.point_path(&point.target, point.jobs);
        write_atomically(&path.with_extension("fio.json"), fio_json.as_bytes())
            .map_err(|e| e.to_string())?;
        write_json(&path, point)
    }

    /// `results.json`, `results.txt` and the plots, of the points so far.
    pub fn write(&self, results: &Results) -> Result<(), String> {
        write_json(&self.0.join("results.json"), results)?;
        write_atomically(&self.0.join("results.txt"), table(results).as_bytes())
            .map_err(|e| e.to_string())?;
        for (name, svg) in plots::series_svgs(&results.points)? {
            write_atomically(&self.0.join(name), svg.as_bytes()).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    write_atomically(path, text.as_bytes()).map_err(|e| e.to_string())
}

/// The text table: one row per point.
pub fn table(results: &Results) -> String {
    let m = &results.machine;
    let mut out = format!(
        "Measured on {} ({}, {} CPUs), Linux {}, {}; power: {}\n",
        m.hostname, m.cpu_model, m.cpus, m.kernel, m.fio_version, results.settings.power
    );
    let job: Vec<String> = results
        .settings
        .job
        .0
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(out, "fio job: {}", job.join(" "));
    let energy = results.points.iter().any(|p| p.joules_per_gib.is_some());
    if !energy {
        out.push_str("No energy figures (--power none).\n");
    }
    let _ = write!(
        out,
        "\n{:<40} {:>4} {:>10} {:>8} {:>8} {:>10}",
        "target", "jobs", "MiB/s", "CPU s/s", "s/GiB", "idle busy%"
    );
    if energy {
        let _ = write!(out, " {:>8} {:>8} {:>8}", "W", "idle W", "J/GiB");
    }
    out.push('\n');
    for p in &results.points {
        let _ = write!(
            out,
            "{:<40} {:>4} {:>10.1} {:>8.3} {:>8.3} {:>10.1}",
            p.target.label,
            p.jobs,
            p.bandwidth_mib_s,
            p.cpu_rate,
            p.cpu_s_per_gib,
            p.idle.busy_percent
        );
        if energy {
            let w = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
            let _ = write!(
                out,
                " {:>8} {:>8} {:>8}",
                w(p.watts),
                w(p.idle.watts),
                w(p.joules_per_gib)
            );
        }
        if !p.trimmed {
            out.push_str("  (run < 3 s: first and last second not cut)");
        }
        if !p.missing_zones.is_empty() {
            let _ = write!(
                out,
                "  (RAPL zones not read: {})",
                p.missing_zones.join(", ")
            );
        }
        out.push('\n');
    }
    out
}
