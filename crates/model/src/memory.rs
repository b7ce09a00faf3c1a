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

/// What [`for_each_crash_image`] went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageCounts {
    pub points: usize,
    pub images: usize,
    /// Failure points whose image set exceeded `max_images` and was sampled.
    pub incomplete: usize,
}

/// Replays `entries` and calls `each(point, image, choice)` with every crash image's
/// contents as it is produced, keeping none: for checking a program's recovery on each
/// image in process (the PM subjects' crash tests). `initial` is as for
/// [`replay_in_memory`].
pub fn for_each_crash_image(
    config: Config,
    initial: Vec<u8>,
    entries: &[Entry],
    each: impl FnMut(FailurePoint, &[u8], &Choice),
) -> Result<ImageCounts, ModelError> {
    assert_eq!(
        initial.len() as u64,
        config.image_len(),
        "initial image size"
    );
    let mut sink = StreamSink {
        persisted: initial,
        each,
        counts: ImageCounts::default(),
    };
    drive(config, entries, &mut sink)?;
    Ok(sink.counts)
}

/// Replays every entry into `sink`.
fn drive(config: Config, entries: &[Entry], sink: &mut impl Sink) -> Result<(), ModelError> {
    let mut replay = Replay::new(config);
    for entry in entries {
        replay.step(entry, sink)?;
    }
    replay.finish(sink)
}

struct StreamSink<F> {
    persisted: Vec<u8>,
    each: F,
    counts: ImageCounts,
}

impl<F: FnMut(FailurePoint, &[u8], &Choice)> Sink for StreamSink<F> {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        persist(&mut self.persisted, offset, bytes);
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        let crash = view.crash_images();
        self.counts.points += 1;
        self.counts.incomplete += usize::from(crash.incomplete);
        for image in &crash.images {
            self.counts.images += 1;
            (self.each)(
                view.point,
                &materialise(&self.persisted, view, image),
                &image.choice,
            );
        }
        Ok(())
    }
}

/// Writes `bytes` at `offset` of `image`.
fn persist(image: &mut [u8], offset: u64, bytes: &[u8]) {
    let at = offset as usize;
    image[at..at + bytes.len()].copy_from_slice(bytes);
}

/// The durable contents `persisted` with `image`'s choice of pending stores applied.
fn materialise(persisted: &[u8], view: &FailureView<'_>, image: &crate::CrashImage) -> Vec<u8> {
    let mut bytes = persisted.to_vec();
    view.apply(image, |offset, data| persist(&mut bytes, offset, data));
    bytes
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
    drive(config, entries, &mut sink)?;
    Ok(sink.points)
}

struct MemorySink<'a, 'b> {
    persisted: Vec<u8>,
    points: Vec<PointImages>,
    words_read: Option<&'a mut WordsRead<'b>>,
    guide: ReadGuide,
}

impl Sink for MemorySink<'_, '_> {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        persist(&mut self.persisted, offset, bytes);
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        let explored = if self.words_read.is_some() {
            let fully_persisted = materialise(&self.persisted, view, &view.fully_persisted());
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
                let bytes = materialise(&self.persisted, view, image);
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
