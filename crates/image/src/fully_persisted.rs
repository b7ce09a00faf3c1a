//! The fully persisted images at a trace's checkpoints and at its end: what `persim faults`
//! corrupts and what the reference configuration recovers. One replay makes them and no
//! other image, so a long trace costs a replay, not an image at each of its failure points.

use crate::generate::{generate_images, Materialise, Points};
use crate::{
    GenerateError, GenerateOptions, Generated, Guidance, PointRecord, PointSink, Progress,
};
use persim_model::FailureKind;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// What [`fully_persisted_images`] made.
#[derive(Debug)]
pub struct FullyPersistedImages {
    /// The image (hash, hex) at each checkpoint's hypercall.
    pub checkpoints: BTreeMap<u64, String>,
    /// The image the trace's end leaves.
    pub end: Option<String>,
    /// The generation: its `failure_points` are the points that got an image.
    pub generated: Generated,
}

/// Replays `trace` with `opts` and writes into `dir` (as `<hash>.img`) the fully persisted
/// image of each failure point of `kinds` (`Checkpoint`, `End`).
pub fn fully_persisted_images(
    opts: &GenerateOptions,
    trace: &Path,
    kinds: &[FailureKind],
    dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<FullyPersistedImages, GenerateError> {
    std::fs::create_dir_all(dir)?;
    let options = GenerateOptions {
        guidance: Guidance::FullyPersisted,
        points: Points::Kinds(kinds.to_vec()),
        store: None,
        materialise: Some(Materialise {
            dir: dir.to_path_buf(),
            hashes: None,
        }),
        ..opts.clone()
    };
    let mut found = Found::default();
    let generated = generate_images(&options, trace, |_| Ok(()), &mut found, progress)?;
    Ok(FullyPersistedImages {
        checkpoints: found.checkpoints,
        end: found.end,
        generated,
    })
}

#[derive(Default)]
struct Found {
    checkpoints: BTreeMap<u64, String>,
    end: Option<String>,
}

impl PointSink for Found {
    fn point(&mut self, point: &PointRecord) -> io::Result<()> {
        let Some(image) = point.images.first() else {
            return Ok(());
        };
        match (point.kind, point.checkpoint) {
            (FailureKind::Checkpoint, Some(checkpoint)) => {
                self.checkpoints
                    .entry(checkpoint)
                    .or_insert_with(|| image.clone());
            }
            (FailureKind::End, _) => self.end = Some(image.clone()),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Image, ImageStore};

    /// examples/journal.trace: two checkpoints, four fences, the end.
    fn journal() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/journal.trace")
    }

    fn files(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn only_the_asked_points_get_an_image() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = GenerateOptions::default();
        let (end_dir, both_dir) = (tmp.path().join("end"), tmp.path().join("both"));
        let end = fully_persisted_images(
            &opts,
            &journal(),
            &[FailureKind::End],
            &end_dir,
            &mut |_| {},
        )
        .unwrap();
        // One image made and written, not one per failure point (the fences).
        assert_eq!(end.generated.failure_points, 1);
        assert_eq!((end.generated.images.len(), files(&end_dir)), (1, 1));
        assert!(end.checkpoints.is_empty());
        let hash = end.end.unwrap();
        let image = Image::from_file(ImageStore::image_file(&end_dir, &hash), 0x1000).unwrap();
        let mut home = [0u8; 16];
        image.read(0x80, &mut home);
        assert_eq!(
            home,
            [0x11; 8].into_iter().chain([0x22; 8]).collect::<Vec<_>>()[..]
        );

        let kinds = [FailureKind::Checkpoint, FailureKind::End];
        let both =
            fully_persisted_images(&opts, &journal(), &kinds, &both_dir, &mut |_| {}).unwrap();
        assert_eq!(both.generated.failure_points, 3);
        assert_eq!(both.checkpoints.keys().copied().collect::<Vec<_>>(), [1, 2]);
        // Checkpoint 2 comes after the last store: its image is the end's.
        assert_eq!(both.checkpoints[&2], hash);
        assert_eq!(files(&both_dir), 2);
    }
}
