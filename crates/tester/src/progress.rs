//! Progress of the stages, reported to an observer (the CLI prints it; tests record it).

use std::time::Duration;
use strum::{IntoStaticStr, VariantNames};

#[derive(Clone, Copy, Debug, PartialEq, Eq, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "kebab-case")]
pub enum Stage {
    Trace,
    /// `reads`: tracing the recoveries of the fully persisted images.
    Reads,
    Images,
    States,
    /// `--reference`: the test traced on the reference configuration, its checkpoints'
    /// states recovered there.
    Reference,
    /// `persim faults`: corrupted images recovered.
    Faults,
}

impl Stage {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// A replay of the trace, and what it is for. A run replays once per pass it needs
/// (`crates/tester/tests/pipeline.rs` counts them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// `reads`: every failure point's fully persisted image.
    FullyPersisted,
    /// The crash images (guided by the read sets with `reads`).
    Images,
    /// `reads`: the crash images again, with NT prefixes where `--nt-prefixes` says.
    NtPrefixes,
    /// The code behind each violation.
    Culprits,
    /// `--reference`: the reference's trace, for its checkpoints' fully persisted images.
    Reference,
    /// `persim faults`: the fully persisted images that faults corrupt.
    Faults,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The trace is replayed once more.
    Replaying(Pass),
    /// The stage's output exists from an earlier run and is used as it is.
    Reused(Stage),
    /// Image generation so far (reported every few thousand entries).
    Replayed {
        entries: u64,
        failure_points: u64,
        images: usize,
    },
    /// One more image recovered (in the states stage, or traced in the reads stage).
    Recovered {
        stage: Stage,
        done: usize,
        total: usize,
    },
    Finished(Stage, Duration),
}

impl Event {
    /// An image generation's progress.
    pub fn replayed(p: persim_image::Progress) -> Event {
        Event::Replayed {
            entries: p.entries,
            failure_points: p.failure_points,
            images: p.images,
        }
    }
}

pub trait Observer {
    fn event(&mut self, event: &Event);
}

/// An observer that ignores everything.
impl Observer for () {
    fn event(&mut self, _: &Event) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names progress lines print; fails when one changes or a stage is missing here.
    #[test]
    fn stages_are_named() {
        let names = [
            (Stage::Trace, "trace"),
            (Stage::Reads, "reads"),
            (Stage::Images, "images"),
            (Stage::States, "states"),
            (Stage::Reference, "reference"),
            (Stage::Faults, "faults"),
        ];
        let listed: Vec<&str> = names.iter().map(|(_, name)| *name).collect();
        assert_eq!(Stage::VARIANTS, listed);
        for (stage, name) in names {
            assert_eq!(stage.name(), name);
        }
    }
}
