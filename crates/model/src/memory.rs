//! Crash images of small regions as plain byte vectors: for tests and for in-process
//! verification of PM code (e.g. the ring buffer's own tests).

use crate::config::Config;
use crate::origin::{Choice, FailurePoint};
use crate::replay::{FailureView, ModelError, Replay, Sink};
use persim_trace::Entry;
use std::io;

/// The crash images of one failure point.
#[derive(Clone, Debug)]
pub struct PointImages {
    pub point: FailurePoint,
    /// Each image's contents with the PM and block choices that produced it.
    pub images: Vec<(Vec<u8>, Choice, Option<Choice>)>,
    pub incomplete: bool,
}

/// Replays `entries` and materialises every crash image in memory. `initial` holds the
/// PM contents followed by the block device's (`config.image_len()` bytes).
pub fn replay_in_memory(
    config: Config,
    initial: Vec<u8>,
    entries: &[Entry],
) -> Result<Vec<PointImages>, ModelError> {
    assert_eq!(
        initial.len() as u64,
        config.image_len(),
        "initial image size"
    );
    let mut sink = MemorySink {
        persisted: initial,
        points: Vec::new(),
    };
    let mut replay = Replay::new(config);
    for entry in entries {
        replay.step(entry, &mut sink)?;
    }
    replay.finish(&mut sink)?;
    Ok(sink.points)
}

struct MemorySink {
    persisted: Vec<u8>,
    points: Vec<PointImages>,
}

impl Sink for MemorySink {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let at = offset as usize;
        self.persisted[at..at + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        let crash = view.crash_images();
        let images = crash
            .images
            .iter()
            .map(|image| {
                let mut bytes = self.persisted.clone();
                view.apply(image, |offset, data| {
                    let at = offset as usize;
                    bytes[at..at + data.len()].copy_from_slice(data);
                });
                (bytes, image.choice.clone(), image.block.clone())
            })
            .collect();
        self.points.push(PointImages {
            point: view.point,
            images,
            incomplete: crash.incomplete,
        });
        Ok(())
    }
}
