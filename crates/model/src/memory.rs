//! Crash images of small regions as plain byte vectors: for tests and for in-process
//! verification of PM code (e.g. the ring buffer's own tests).

use crate::config::Config;
use crate::guide::{Explored, ReadGuide};
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
    /// With [`replay_in_memory_guided`]: the lines explored and skipped.
    pub explored: Option<Explored>,
}

/// What recovery read of an image: the addresses of the aligned 8-byte words it loaded
/// before writing them, ascending, or `None` when unknown.
pub type WordsRead<'a> = dyn FnMut(&[u8]) -> Option<Vec<u64>> + 'a;

/// Replays `entries` and materialises every crash image in memory. `initial` holds the
/// PM contents followed by the block device's (`config.image_len()` bytes).
pub fn replay_in_memory(
    config: Config,
    initial: Vec<u8>,
    entries: &[Entry],
) -> Result<Vec<PointImages>, ModelError> {
    replay(config, initial, entries, None)
}

/// [`replay_in_memory`] for the `reads` strategy: `words_read` runs the recovery on each
/// failure point's fully persisted image and says which words it read.
pub fn replay_in_memory_guided(
    config: Config,
    initial: Vec<u8>,
    entries: &[Entry],
    words_read: &mut WordsRead<'_>,
) -> Result<Vec<PointImages>, ModelError> {
    replay(config, initial, entries, Some(words_read))
}

fn replay(
    config: Config,
    initial: Vec<u8>,
    entries: &[Entry],
    words_read: Option<&mut WordsRead<'_>>,
) -> Result<Vec<PointImages>, ModelError> {
    assert_eq!(
        initial.len() as u64,
        config.image_len(),
        "initial image size"
    );
    let mut sink = MemorySink {
        persisted: initial,
        points: Vec::new(),
        words_read,
        guide: ReadGuide::default(),
    };
    let mut replay = Replay::new(config);
    for entry in entries {
        replay.step(entry, &mut sink)?;
    }
    replay.finish(&mut sink)?;
    Ok(sink.points)
}

struct MemorySink<'a, 'b> {
    persisted: Vec<u8>,
    points: Vec<PointImages>,
    words_read: Option<&'a mut WordsRead<'b>>,
    guide: ReadGuide,
}

impl MemorySink<'_, '_> {
    fn materialise(&self, view: &FailureView<'_>, image: &crate::CrashImage) -> Vec<u8> {
        let mut bytes = self.persisted.clone();
        view.apply(image, |offset, data| {
            let at = offset as usize;
            bytes[at..at + data.len()].copy_from_slice(data);
        });
        bytes
    }
}

impl Sink for MemorySink<'_, '_> {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let at = offset as usize;
        self.persisted[at..at + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        let explored = if self.words_read.is_some() {
            let fully_persisted = self.materialise(view, &view.fully_persisted());
            let read = self.words_read.as_mut().and_then(|f| f(&fully_persisted));
            Some(self.guide.split(view, read.as_deref()))
        } else {
            None
        };
        let crash = match &explored {
            Some(e) => view.crash_images_guided(|line| e.explores(line), view.config().nt_prefixes),
            None => view.crash_images(),
        };
        let images = crash
            .images
            .iter()
            .map(|image| {
                let bytes = self.materialise(view, image);
                (bytes, image.choice.clone(), image.block.clone())
            })
            .collect();
        self.points.push(PointImages {
            point: view.point,
            images,
            incomplete: crash.incomplete,
            explored,
        });
        Ok(())
    }
}
