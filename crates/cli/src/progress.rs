//! Progress lines on stderr for long runs, at most one every two seconds.

use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_secs(2);

pub struct Progress {
    started: Instant,
    last: Instant,
    enabled: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        let now = Instant::now();
        Progress {
            started: now,
            last: now,
            enabled,
        }
    }

    /// Prints the line `describe` returns if the last one is old enough; `describe` is only
    /// called then, so callers can pass formatting work cheaply.
    pub fn tick(&mut self, describe: impl FnOnce() -> String) {
        if self.enabled && self.last.elapsed() >= INTERVAL {
            self.last = Instant::now();
            eprintln!(
                "[{:>6.1}s] {}",
                self.started.elapsed().as_secs_f64(),
                describe()
            );
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}
