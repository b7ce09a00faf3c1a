//! Samples of CPU time and energy taken while something runs, and what they give over a
//! window of it: the thesis' average powers and CPU time rate, which need no
//! synchronisation with the benchmark beyond cutting its first and last second.

use crate::cpu_time::{ticks_per_second, CpuTimes};
use crate::power::Power;
use crate::powercap::{self, Snapshot};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often `/proc/stat` and the RAPL counters are read (reading them is cheap; the
/// window's ends are found to this precision).
const PERIOD: Duration = Duration::from_millis(200);

/// One reading, `t` seconds after the series' clock started.
#[derive(Clone, Debug)]
pub struct Sample {
    pub t: f64,
    pub cpu: CpuTimes,
    /// The RAPL counters, with `--power rapl`.
    pub energy: Option<Snapshot>,
}

/// Samples taken on a thread until [`Sampler::stop`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub fn start(power: &Power, clock: Instant) -> Sampler {
        let zones = match power {
            Power::Rapl(zones) => Some(zones.clone()),
            _ => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop2, sink) = (Arc::clone(&stop), Arc::clone(&samples));
        let thread = std::thread::spawn(move || loop {
            let cpu = CpuTimes::now().unwrap_or_default();
            let energy = zones.as_deref().map(Snapshot::read);
            let t = clock.elapsed().as_secs_f64();
            sink.lock().unwrap().push(Sample { t, cpu, energy });
            if stop2.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(PERIOD);
        });
        Sampler {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    /// Stops sampling (after one last sample) and returns the samples.
    pub fn stop(mut self) -> Vec<Sample> {
        self.finish();
        std::mem::take(&mut *self.samples.lock().unwrap())
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.finish();
    }
}

/// What the samples say about a window.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Seconds between the samples that bound it.
    pub seconds: f64,
    /// Busy CPU seconds per second, all CPUs together (2.0: two CPUs busy).
    pub cpu_rate: f64,
    /// The busy share of all CPUs' time, in percent.
    pub busy_percent: f64,
    /// The average power in watts (RAPL; a meter's is averaged by [`crate::power::Meter`]).
    pub watts: Option<f64>,
    /// RAPL zones that could not be read at the window's ends.
    pub missing_zones: Vec<String>,
}

/// The figures from the first sample at or after `from` to the last at or before `to`;
/// `None` when fewer than two samples lie between them.
pub fn window(samples: &[Sample], power: &Power, from: f64, to: f64) -> Option<Window> {
    let first = samples.iter().find(|s| s.t >= from)?;
    let last = samples.iter().rev().find(|s| s.t <= to)?;
    let seconds = last.t - first.t;
    if seconds <= 0.0 {
        return None;
    }
    let ticks = last.cpu.since(&first.cpu);
    let (watts, missing_zones) = match (power, &first.energy, &last.energy) {
        (Power::Rapl(zones), Some(a), Some(b)) => {
            let (joules, missing) = powercap::joules_between(zones, a, b);
            (Some(joules / seconds), missing)
        }
        _ => (None, Vec::new()),
    };
    Some(Window {
        seconds,
        cpu_rate: ticks.busy as f64 / ticks_per_second() / seconds,
        busy_percent: ticks.busy_percent(),
        watts,
        missing_zones,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, busy: u64, idle: u64) -> Sample {
        Sample {
            t,
            cpu: CpuTimes {
                system: busy,
                idle,
                ..CpuTimes::default()
            },
            energy: None,
        }
    }

    #[test]
    fn the_window_is_bounded_by_the_samples_inside_it() {
        let hz = ticks_per_second() as u64;
        let s = [
            sample(0.0, 0, 0),
            sample(1.0, 10 * hz, 0),
            sample(2.0, 11 * hz, hz),
            sample(3.0, 12 * hz, 2 * hz),
            sample(4.0, 50 * hz, 2 * hz),
        ];
        let w = window(&s, &Power::None, 0.9, 3.5).unwrap();
        assert_eq!(w.seconds, 2.0);
        assert_eq!(w.cpu_rate, 1.0);
        assert_eq!(w.busy_percent, 50.0);
        assert_eq!(w.watts, None);
        assert!(window(&s, &Power::None, 3.5, 3.9).is_none());
    }
}
