//! On what a series was measured: the machine, its kernel and fio's version, written
//! with every result.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub hostname: String,
    /// `/proc/cpuinfo`'s first `model name`.
    pub cpu_model: String,
    /// CPUs online when the series started.
    pub cpus: usize,
    /// The running kernel's release (`uname -r`).
    pub kernel: String,
    pub fio_version: String,
}

impl MachineInfo {
    pub fn this_machine(fio_version: &str) -> MachineInfo {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unknown".into())
        };
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or("unknown".into(), |(_, m)| m.trim().to_owned());
        MachineInfo {
            hostname: read("/proc/sys/kernel/hostname"),
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease"),
            fio_version: fio_version.to_owned(),
        }
    }
}
