//! Where power figures come from (`--power`): RAPL through powercap, an external meter
//! (a program printing watts, one line per sample), or none.

use crate::powercap::{self, Zone};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A `--power` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PowerSource {
    /// RAPL's package and DRAM zones.
    Rapl,
    /// A shell command that prints watts, one number per line per sample.
    Meter(String),
    /// No energy figures.
    None,
}

impl PowerSource {
    pub fn parse(text: &str) -> Result<PowerSource, String> {
        match text {
            "rapl" => Ok(PowerSource::Rapl),
            "none" => Ok(PowerSource::None),
            _ => match text.strip_prefix("meter:") {
                Some(cmd) if !cmd.trim().is_empty() => Ok(PowerSource::Meter(cmd.to_owned())),
                _ => Err(format!(
                    "`--power {text}`: use rapl, none, or meter:COMMAND (a program that prints \
                     watts, one number per line)"
                )),
            },
        }
    }

    pub fn name(&self) -> String {
        match self {
            PowerSource::Rapl => "rapl".into(),
            PowerSource::Meter(cmd) => format!("meter:{cmd}"),
            PowerSource::None => "none".into(),
        }
    }
}

/// A running source of power samples, started by [`Power::start`].
pub enum Power {
    Rapl(Vec<Zone>),
    Meter(Meter),
    None,
}

impl Power {
    /// Opens the source: finds the RAPL zones (under `powercap_root`) or starts the meter.
    pub fn start(
        source: &PowerSource,
        powercap_root: &Path,
        clock: Instant,
    ) -> Result<Power, String> {
        Ok(match source {
            PowerSource::Rapl => {
                let zones = powercap::rapl_zones(powercap_root)?;
                // Fail now, not after a series: the counters are root-only since Linux 5.10.
                let snapshot = powercap::Snapshot::read(&zones);
                if let Some(z) = zones.iter().find(|z| !snapshot.0.contains_key(&z.dir)) {
                    return Err(format!(
                        "cannot read {}/energy_uj (RAPL counters are readable by root only); \
                         run as root, or use --power meter:COMMAND or --power none",
                        z.dir.display()
                    ));
                }
                Power::Rapl(zones)
            }
            PowerSource::Meter(cmd) => Power::Meter(Meter::start(cmd, clock)?),
            PowerSource::None => Power::None,
        })
    }
}

/// An external meter: its process and the watts it printed, each with the time it was
/// read (seconds since the series' clock).
pub struct Meter {
    child: Child,
    samples: Arc<Mutex<MeterSamples>>,
}

#[derive(Default)]
struct MeterSamples {
    watts: Vec<(f64, f64)>,
    /// The first line that was not a number.
    error: Option<String>,
}

impl Meter {
    fn start(cmd: &str, clock: Instant) -> Result<Meter, String> {
        let mut child = Command::new("sh")
            .args(["-c", cmd])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the power meter `{cmd}`: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let samples = Arc::new(Mutex::new(MeterSamples::default()));
        let sink = Arc::clone(&samples);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let t = clock.elapsed().as_secs_f64();
                let mut s = sink.lock().unwrap();
                match parse_watts(&line) {
                    Some(w) => s.watts.push((t, w)),
                    None if line.trim().is_empty() => {}
                    None => {
                        s.error.get_or_insert(line);
                    }
                }
            }
        });
        Ok(Meter { child, samples })
    }

    /// The average of the samples read from `from` to `to` (seconds on the series'
    /// clock).
    pub fn average(&mut self, from: f64, to: f64) -> Result<f64, String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!("the power meter exited ({status})"));
        }
        let s = self.samples.lock().unwrap();
        if let Some(line) = &s.error {
            return Err(format!(
                "the power meter printed `{line}`, not watts (one number per line)"
            ));
        }
        average_in(&s.watts, from, to).ok_or_else(|| {
            format!("the power meter printed no sample from {from:.1} s to {to:.1} s")
        })
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        // Our own child, by its id.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A meter's line: a number of watts, optionally followed by a unit or other fields.
fn parse_watts(line: &str) -> Option<f64> {
    let first = line.split_whitespace().next()?;
    let number = first.strip_suffix('W').unwrap_or(first);
    number.parse().ok().filter(|w: &f64| w.is_finite())
}

/// The mean of the values whose time lies in `from..=to`.
pub fn average_in(samples: &[(f64, f64)], from: f64, to: f64) -> Option<f64> {
    let inside: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| (from..=to).contains(t))
        .map(|&(_, w)| w)
        .collect();
    (!inside.is_empty()).then(|| inside.iter().sum::<f64>() / inside.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_sources_parse() {
        assert_eq!(PowerSource::parse("rapl"), Ok(PowerSource::Rapl));
        assert_eq!(PowerSource::parse("none"), Ok(PowerSource::None));
        assert_eq!(
            PowerSource::parse("meter:ssh pi read-meter"),
            Ok(PowerSource::Meter("ssh pi read-meter".into()))
        );
        assert!(PowerSource::parse("meter:")
            .unwrap_err()
            .contains("meter:COMMAND"));
        assert!(PowerSource::parse("ipmi").is_err());
    }

    #[test]
    fn meter_lines() {
        assert_eq!(parse_watts("42.5"), Some(42.5));
        assert_eq!(parse_watts("  17W"), Some(17.0));
        assert_eq!(parse_watts("17.25 W 1795709229"), Some(17.25));
        assert_eq!(parse_watts("watts: 3"), None);
        assert_eq!(parse_watts("nan"), None);
    }

    #[test]
    fn average_over_a_window_only() {
        let s = [
            (0.5, 100.0),
            (1.0, 10.0),
            (2.0, 20.0),
            (3.0, 30.0),
            (3.5, 100.0),
        ];
        assert_eq!(average_in(&s, 1.0, 3.0), Some(20.0));
        assert_eq!(average_in(&s, 4.0, 5.0), None);
    }

    #[test]
    fn a_real_meter_process_is_read_and_averaged() {
        let clock = Instant::now();
        let mut meter =
            Meter::start("for w in 10 20 30; do echo $w; done; sleep 5", clock).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while meter.samples.lock().unwrap().watts.len() < 3 && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(meter.average(0.0, 1e9), Ok(20.0));
    }

    #[test]
    fn a_meter_printing_text_is_an_error() {
        let clock = Instant::now();
        let mut meter = Meter::start("echo hello; sleep 5", clock).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while meter.samples.lock().unwrap().error.is_none() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let err = meter.average(0.0, 1e9).unwrap_err();
        assert!(err.contains("`hello`"), "{err}");
    }
}
