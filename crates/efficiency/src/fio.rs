//! fio, the real one (Debian's `fio` package), driven by its command line and read back
//! through its JSON output (`--output-format=json`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The Debian package that has it, named in every error about a missing or old fio.
pub const PACKAGE: &str = "fio";
/// The oldest fio whose JSON output this reader knows (fio 3's layout of `jobs`).
pub const MIN_MAJOR: u32 = 3;

/// The thesis' job (its Table 4.2): 16 KiB synchronous random writes, 100 MiB per job,
/// 30 s after a 2 s ramp. `numjobs` and where the files go are set per run.
pub const DEFAULT_JOB: [(&str, &str); 8] = [
    ("ioengine", "sync"),
    ("rw", "randwrite"),
    ("sync", "1"),
    ("bs", "16k"),
    ("size", "100M"),
    ("time_based", "1"),
    ("runtime", "30"),
    ("ramp_time", "2"),
];

/// Options Persim sets itself: a user's value would break the series' bookkeeping.
const RESERVED: [&str; 7] = [
    "name",
    "directory",
    "filename",
    "numjobs",
    "output",
    "output-format",
    "group_reporting",
];

/// A fio job's options, in order, as `key=value` pairs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FioJob(pub Vec<(String, String)>);

impl Default for FioJob {
    fn default() -> FioJob {
        FioJob(
            DEFAULT_JOB
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

impl FioJob {
    /// The default job with `overrides` (`key=value` replaces or adds an option, `key=`
    /// removes it).
    pub fn with_overrides(overrides: &[String]) -> Result<FioJob, String> {
        let mut job = FioJob::default();
        for o in overrides {
            let (key, value) = o.split_once('=').ok_or_else(|| {
                format!("`--fio-option {o}`: write key=value (key= removes a default option)")
            })?;
            let key = key.trim_start_matches('-');
            if key.is_empty() {
                return Err(format!("`--fio-option {o}`: the option name is empty"));
            }
            if RESERVED.contains(&key) {
                return Err(format!(
                    "`--fio-option {o}`: Persim sets `{key}` itself (the jobs come from --jobs, \
                     the files go into a directory of the target)"
                ));
            }
            job.0.retain(|(k, _)| k != key);
            if !value.is_empty() {
                job.0.push((key.to_owned(), value.to_owned()));
            }
        }
        Ok(job)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Seconds fio ramps up before it measures (`ramp_time`, plain seconds or with a
    /// unit: `2`, `2s`, `500ms`, `1m`).
    pub fn ramp_seconds(&self) -> f64 {
        self.get("ramp_time").and_then(seconds).unwrap_or(0.0)
    }

    /// fio's arguments for `jobs` jobs doing their I/O at `place`.
    pub fn args(&self, jobs: u32, place: Place) -> Vec<String> {
        let mut args = vec!["--name=persim".to_owned()];
        match place {
            Place::Directory(dir) => args.push(format!("--directory={}", dir.display())),
            Place::Device(device) => {
                args.push(format!("--filename={}", device.display()));
                // each job its own range, as each has a file of its own in a directory
                if let (Some(size), None) = (self.get("size"), self.get("offset_increment")) {
                    args.push(format!("--offset_increment={size}"));
                }
            }
        }
        args.push(format!("--numjobs={jobs}"));
        args.extend(self.0.iter().map(|(k, v)| format!("--{k}={v}")));
        // one report over all jobs, whose latency percentiles count every job's I/O
        args.push("--group_reporting".to_owned());
        args.push("--output-format=json".to_owned());
        args
    }
}

/// Where a run's I/O goes: files in a directory, or a device written directly (the raw
/// baseline).
#[derive(Clone, Copy, Debug)]
pub enum Place<'a> {
    Directory(&'a Path),
    Device(&'a Path),
}

/// A fio duration: seconds by default, or with a unit `us`, `ms`, `s`, `m`, `h`.
fn seconds(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.trim().parse().ok()?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "us" => 1e-6,
        "ms" => 1e-3,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Some(n * scale)
}

/// The installed fio's version (`fio-3.33`), or an error naming the package when it is
/// missing or older than fio [`MIN_MAJOR`].
pub fn version(fio: &str) -> Result<String, String> {
    let install = format!("install the Debian package `{PACKAGE}` (apt-get install {PACKAGE})");
    let out = Command::new(fio)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run `{fio}` ({e}): {install}"))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let major = text
        .strip_prefix("fio-")
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(m) if m >= MIN_MAJOR => Ok(text),
        _ => Err(format!(
            "`{fio} --version` says `{text}`, Persim needs fio {MIN_MAJOR} or newer: {install}"
        )),
    }
}

/// What one fio run measured, all jobs together (the time after `ramp_time` only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FioResult {
    pub fio_version: String,
    pub jobs: u32,
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// The longest job's measured time, seconds.
    pub runtime_s: f64,
    pub write_iops: f64,
    /// Writes fio issued and saw complete (`write.total_ios`).
    pub writes: u64,
    /// The writes' completion latency (`write.clat_ns`): submission to completion of each
    /// write call. `None` in results recorded before Persim read it.
    #[serde(default)]
    pub write_clat: Option<Latency>,
    /// The latency of the syncs fio issued (`fsync=N`, `sync.lat_ns`); `None` without any.
    #[serde(default)]
    pub sync_lat: Option<Latency>,
}

/// A latency over all jobs' I/Os of one kind, microseconds (in guest-virtual time when
/// the guest's clock counts instructions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub mean_us: f64,
    /// Median and 99th percentile: only from one report for all jobs (fio's
    /// `group_reporting`, or one job); `None` when jobs reported apart.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// The latency `stats` (fio's `{N, mean, percentile}` in ns) of each job, merged: the
/// mean weighted by I/O count; `None` when no job has an I/O.
fn latency(stats: &[&Value]) -> Option<Latency> {
    let n = |s: &Value| s["N"].as_f64().unwrap_or(0.0);
    let total: f64 = stats.iter().map(|s| n(s)).sum();
    if total == 0.0 {
        return None;
    }
    let mean_ns: f64 = stats
        .iter()
        .map(|s| n(s) * s["mean"].as_f64().unwrap_or(0.0))
        .sum::<f64>()
        / total;
    let percentile = |p: &str| match stats {
        [one] => one["percentile"][p].as_f64().map(|ns| ns / 1000.0),
        _ => None,
    };
    Some(Latency {
        mean_us: mean_ns / 1000.0,
        p50_us: percentile("50.000000"),
        p99_us: percentile("99.000000"),
    })
}

impl FioResult {
    /// Bytes written and read per second.
    pub fn bandwidth(&self) -> f64 {
        if self.runtime_s > 0.0 {
            (self.bytes_written + self.bytes_read) as f64 / self.runtime_s
        } else {
            0.0
        }
    }
}

/// Reads fio's JSON output: the jobs' `read` and `write` parts, summed over jobs (with or
/// without `group_reporting`). A job that reports an error is an error.
pub fn parse_output(json: &str) -> Result<FioResult, String> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| format!("fio's JSON output is not JSON: {e}"))?;
    let fio_version = v["fio version"].as_str().unwrap_or("unknown").to_owned();
    let jobs = v["jobs"]
        .as_array()
        .filter(|j| !j.is_empty())
        .ok_or("fio's JSON output has no `jobs`")?;
    let number = |job: &Value, dir: &str, key: &str| -> Result<f64, String> {
        job[dir][key]
            .as_f64()
            .ok_or_else(|| format!("fio's JSON output has no `{dir}.{key}`"))
    };
    let mut result = FioResult {
        fio_version,
        jobs: 0,
        bytes_written: 0,
        bytes_read: 0,
        runtime_s: 0.0,
        write_iops: 0.0,
        writes: 0,
        write_clat: None,
        sync_lat: None,
    };
    for job in jobs {
        let error = job["error"].as_i64().unwrap_or(0);
        if error != 0 {
            return Err(format!(
                "fio job `{}` failed with error {error}",
                job["jobname"].as_str().unwrap_or("?")
            ));
        }
        result.bytes_written += number(job, "write", "io_bytes")? as u64;
        result.bytes_read += number(job, "read", "io_bytes")? as u64;
        result.write_iops += number(job, "write", "iops")?;
        result.writes += number(job, "write", "total_ios")? as u64;
        let ms = number(job, "write", "runtime")?.max(number(job, "read", "runtime")?);
        result.runtime_s = result.runtime_s.max(ms / 1000.0);
        // `numjobs` in the job's options under group_reporting, one entry per job without
        result.jobs += job["job options"]["numjobs"]
            .as_str()
            .and_then(|n| n.parse().ok())
            .filter(|_| jobs.len() == 1)
            .unwrap_or(1);
    }
    let stats =
        |dir: &str, key: &str| -> Vec<&Value> { jobs.iter().map(|j| &j[dir][key]).collect() };
    result.write_clat = latency(&stats("write", "clat_ns"));
    result.sync_lat = latency(&stats("sync", "lat_ns"));
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_add_and_remove_options() {
        let job =
            FioJob::with_overrides(&["bs=4k".into(), "--fsync=1".into(), "sync=".into()]).unwrap();
        assert_eq!(job.get("bs"), Some("4k"));
        assert_eq!(job.get("fsync"), Some("1"));
        assert_eq!(job.get("sync"), None);
        assert_eq!(job.get("rw"), Some("randwrite"));
        let args = job.args(4, Place::Directory(Path::new("/mnt/x")));
        assert_eq!(
            args[..3],
            ["--name=persim", "--directory=/mnt/x", "--numjobs=4"]
        );
        assert!(args.contains(&"--bs=4k".to_owned()));
        assert!(args.contains(&"--group_reporting".to_owned()));
        assert_eq!(args.last().unwrap(), "--output-format=json");
    }

    #[test]
    fn jobs_on_a_device_write_ranges_of_their_own() {
        let job = FioJob::with_overrides(&["size=4M".into()]).unwrap();
        let args = job.args(2, Place::Device(Path::new("/dev/pmem0")));
        assert_eq!(
            args[..4],
            [
                "--name=persim",
                "--filename=/dev/pmem0",
                "--offset_increment=4M",
                "--numjobs=2"
            ]
        );
        let own = FioJob::with_overrides(&["offset_increment=1G".into()]).unwrap();
        let args = own.args(2, Place::Device(Path::new("/dev/pmem0")));
        assert!(!args.contains(&"--offset_increment=100M".to_owned()));
        assert!(args.contains(&"--offset_increment=1G".to_owned()));
    }

    #[test]
    fn reserved_and_malformed_overrides_are_refused() {
        let err = FioJob::with_overrides(&["numjobs=3".into()]).unwrap_err();
        assert!(err.contains("--jobs"), "{err}");
        assert!(FioJob::with_overrides(&["directory=/tmp".into()]).is_err());
        let err = FioJob::with_overrides(&["bs".into()]).unwrap_err();
        assert!(err.contains("key=value"), "{err}");
    }

    #[test]
    fn ramp_time_units() {
        let ramp = |v: &str| {
            FioJob::with_overrides(&[format!("ramp_time={v}")])
                .unwrap()
                .ramp_seconds()
        };
        assert_eq!(FioJob::default().ramp_seconds(), 2.0);
        assert_eq!(ramp("5"), 5.0);
        assert_eq!(ramp("500ms"), 0.5);
        assert_eq!(ramp("1m"), 60.0);
    }
}
