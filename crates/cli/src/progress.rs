//! Progress lines on stderr for long runs, at most one every two seconds.

use persim_tester::{Event, Observer, Stage};
use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_secs(2);

/// Prints the stages' events of one test, prefixed with its name; frequent events are
/// rate-limited.
pub struct Progress {
    prefix: String,
    started: Instant,
    last: Instant,
    enabled: bool,
}

impl Progress {
    pub fn new(prefix: impl Into<String>, enabled: bool) -> Progress {
        let now = Instant::now();
        Progress {
            prefix: prefix.into(),
            started: now,
            last: now,
            enabled,
        }
    }

    fn say(&self, text: &str) {
        if self.enabled {
            say!("{}: {text}", self.prefix);
        }
    }

    /// Whether a frequent event may be printed now.
    fn due(&mut self) -> bool {
        let due = self.enabled && self.last.elapsed() >= INTERVAL;
        if due {
            self.last = Instant::now();
        }
        due
    }
}

impl Observer for Progress {
    fn event(&mut self, event: &Event) {
        match event {
            Event::Reused(stage) => self.say(match stage {
                Stage::Trace => "trace: reusing the recorded trace",
                Stage::Reads => "reads: reusing the traced recoveries",
                Stage::Images => "images: reusing the generated images",
                Stage::States => "states: reusing the recovered states",
                Stage::Reference => "reference: reusing the reference's states",
                Stage::Faults => "faults: reusing the recovered states",
            }),
            // Each pass reports its own progress and end.
            Event::Replaying(_) => {}
            Event::Replayed {
                entries,
                failure_points,
                images,
            } => {
                if self.due() {
                    self.say(&format!(
                        "[{:>6.1}s] {entries} entries replayed, {failure_points} failure points, \
                         {images} distinct images",
                        self.started.elapsed().as_secs_f64()
                    ));
                }
            }
            Event::Recovered { stage, done, total } => {
                if self.due() || done == total {
                    self.say(&match stage {
                        Stage::Reads => format!(
                            "reads: {done}/{total} recoveries of fully persisted images traced"
                        ),
                        Stage::Faults => format!("faults: {done}/{total} images recovered"),
                        _ => format!("states: {done}/{total} images recovered"),
                    })
                }
            }
            Event::Finished(stage, took) => self.say(&format!(
                "{} done in {:.1} s",
                stage.name(),
                took.as_secs_f64()
            )),
        }
    }
}
