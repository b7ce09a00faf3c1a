//! The images stage: the crash images of the run's trace into its image store, and their
//! failure points into `images.json` (which appears only when the generation is
//! complete). The engine is `persim_image::generate_images`; this stage chooses its
//! options and guidance, and recovers the new images a window at a time as they are made
//! (the states stage then recovers the last window), checking the free space before each
//! window, so a run never holds more than a window of images without states on disk.

use super::states::{self, recover_and_save, Recovery};
use super::traced::share_state;
use super::{reads, Run};
use crate::options::PipelineOptions;
use crate::progress::{Event, Pass, Stage};
use crate::rundir::RunDir;
use anyhow::{bail, Context, Result};
use persim_image::{
    generate_images, GenerateOptions, Guidance, Image, ImageStore, ImagesIndex, ImagesJsonWriter,
    Materialise, NtPrefixesAt, PointRecord, PointSink, Points,
};
use persim_model::{Config, Strategy};
use persim_trace::atomic_file::create_atomically;
use persim_trace::disk_space;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashSet};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The options of a run's image generation into `store`.
pub fn generate_options(p: &PipelineOptions, store: PathBuf) -> GenerateOptions {
    GenerateOptions {
        cache: p.cache,
        strategy: p.strategy,
        max_images: p.max_images,
        scope: p.scope,
        // Intervals start at checkpoint 1; what comes before (the program starting up) is
        // judged by no interval.
        from_checkpoint: Some(1),
        store: Some(store),
        ..GenerateOptions::default()
    }
}

/// Generates the run's images unless `images.json` exists.
pub(super) fn images(run: &mut Run, nt_at: &NtPrefixesAt) -> Result<()> {
    let done = run.dir.images_index().is_file();
    let guidance = if done {
        Guidance::Unguided
    } else {
        guidance(run, nt_at)?
    };
    run.timings.images = run.stage(Stage::Images, done, |run| {
        generate(run, guidance, Pass::Images)
    })?;
    Ok(())
}

/// How the run's strategy guides a generation: with `reads`, by the read sets (traced
/// once per run) and NT prefixes at `nt_at`.
pub(super) fn guidance(run: &mut Run, nt_at: &NtPrefixesAt) -> Result<Guidance> {
    if run.opts.strategy != Strategy::Reads {
        return Ok(Guidance::Unguided);
    }
    let sets = reads::read_sets(run)?;
    Ok(Guidance::ReadSets(sets, nt_at.clone()))
}

/// Generates the run's images into its store and writes `images.json` (a replay of the
/// trace for `pass`), recovering them window by window as they are made.
pub(super) fn generate(run: &mut Run, guidance: Guidance, pass: Pass) -> Result<()> {
    run.replaying(pass);
    run.index = None;
    let dir = run.dir;
    let keep_images = run.opts.keep_images;
    let options = GenerateOptions {
        guidance,
        ..generate_options(run.opts, dir.image_store())
    };
    let run = RefCell::new(run);
    let mut failure = None;
    let image_len = Cell::new(0);
    let written = create_atomically(&dir.images_index(), |file| {
        let mut window = Window {
            run: &run,
            writer: ImagesJsonWriter::new(BufWriter::new(file)),
            image_len: &image_len,
            handled: HashSet::new(),
            pending: Vec::new(),
            failure: None,
        };
        let started = |config: &Config| {
            image_len.set(config.image_len());
            check_space(dir, config.image_len(), keep_images)
        };
        let generated = generate_images(&options, &dir.trace(), started, &mut window, &mut |p| {
            run.borrow_mut().observer.event(&Event::replayed(p))
        });
        match generated {
            Ok(generated) => window.writer.finish(&generated.images)?.flush(),
            Err(e) => {
                failure = Some(window.failure.take().unwrap_or_else(|| e.into()));
                Err(io::Error::other("image generation failed"))
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(written?)
}

/// Crash images on disk at once without a state: the generation hands each full window to
/// the recovery, which saves their states and deletes their files (unless `--keep-images`)
/// before more are made, so the disk holds a window of images whatever their number.
pub(super) const IMAGE_WINDOW: usize = 32;

/// The point sink of a run's generation: `images.json`, and the window of new images.
struct Window<'r, 'a, W: Write> {
    run: &'r RefCell<&'r mut Run<'a>>,
    writer: ImagesJsonWriter<W>,
    /// The upper bound of one image file's size (images are sparse), once known.
    image_len: &'r Cell<u64>,
    /// Every image met so far (each is recovered once).
    handled: HashSet<String>,
    /// New images (hash, file) without a state.
    pending: Vec<(String, PathBuf)>,
    /// Why the recovery of a window failed.
    failure: Option<anyhow::Error>,
}

impl<W: Write> PointSink for Window<'_, '_, W> {
    fn point(&mut self, point: &PointRecord) -> io::Result<()> {
        self.writer.point(point)
    }

    fn stored(&mut self, hash: &str, image: &Image) -> io::Result<()> {
        // The error itself is kept for the stage (the engine wraps what it is handed).
        self.take(hash, image).map_err(|e| {
            let message = e.to_string();
            self.failure = Some(e);
            io::Error::other(message)
        })
    }
}

impl<W: Write> Window<'_, '_, W> {
    /// Adds a new image without a state to the window, recovering the window when full;
    /// an image like one whose recovery was traced takes its state instead.
    fn take(&mut self, hash: &str, image: &Image) -> Result<()> {
        if !self.handled.insert(hash.to_owned()) {
            return Ok(());
        }
        let (dir, keep_images) = {
            let run = self.run.borrow();
            (run.dir, run.opts.keep_images)
        };
        let file = ImageStore::image_file(&dir.image_store(), hash);
        let known = states::saved_state(dir, hash).is_some() || self.share(dir, hash, image)?;
        if !known {
            self.pending.push((hash.to_owned(), file));
        } else if !keep_images {
            // Made again by a resumed run, or like a traced one: its state is known.
            drop(std::fs::remove_file(file));
        }
        if self.pending.len() >= IMAGE_WINDOW {
            self.recover(dir, keep_images)?;
        }
        Ok(())
    }

    /// Gives image `hash` the state of a traced image like it, if there is one.
    fn share(&self, dir: &RunDir, hash: &str, image: &Image) -> Result<bool> {
        let mut run = self.run.borrow_mut();
        let Some(like) = run.traced.like(image) else {
            return Ok(false);
        };
        share_state(dir, &like.hash, hash)?;
        run.timings.shared += 1;
        Ok(true)
    }

    /// Recovers the pending images, saving each state and deleting each file, then checks
    /// that the next window fits.
    fn recover(&mut self, dir: &RunDir, keep_images: bool) -> Result<()> {
        let images = std::mem::take(&mut self.pending);
        let how = Recovery {
            reads: false,
            keep_images,
            stage: Stage::States,
            done_of: None,
        };
        recover_and_save(&mut self.run.borrow_mut(), &images, how, &mut |_, _| Ok(()))?;
        Ok(check_space(dir, self.image_len.get(), keep_images)?)
    }
}

/// Refuses to go on when the file system of the run's image store cannot take the next
/// window of images, each counted at its full length (an upper bound: images are sparse).
/// Kept images (`--keep-images`) take space the next check sees.
fn check_space(dir: &RunDir, image_len: u64, keep_images: bool) -> io::Result<()> {
    let store = dir.image_store();
    std::fs::create_dir_all(&store)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", store.display())))?;
    let free = disk_space::free_space(&store)?;
    let needed = IMAGE_WINDOW as u64 * image_len;
    if free.available >= needed {
        return Ok(());
    }
    let kept = if keep_images {
        ", run without --keep-images (kept images fill the disk) or with a lower --max-images"
    } else {
        ""
    };
    Err(io::Error::new(
        io::ErrorKind::StorageFull,
        format!(
            "not enough space on {} for the crash images in {}: up to {IMAGE_WINDOW} images of \
             up to {} KiB each are on disk at once ({} MiB needed, {} MiB free). Free space \
             there{kept}, or give another --out; the run directory is kept, and the same \
             command resumes it",
            free.device,
            store.display(),
            image_len.div_ceil(1 << 10),
            disk_space::mib(needed),
            free.available >> 20,
        ),
    ))
}

/// `images.json` of the last images pass, read once per pass.
pub(super) fn index<'r>(run: &'r mut Run) -> Result<&'r ImagesIndex> {
    if run.index.is_none() {
        run.index = Some(ImagesIndex::read(&run.dir.images_index())?);
    }
    Ok(run.index.as_ref().expect("read above"))
}

/// Makes the crash images with these hashes (hex) of a run again, from its trace and the
/// options it ran with, as `<hash>.img` in `out`; returns their paths. An image the run's
/// options do not produce is an error.
pub fn materialise_images(dir: &RunDir, hashes: &[String], out: &Path) -> Result<Vec<PathBuf>> {
    let inputs = dir
        .read_inputs()?
        .with_context(|| format!("{} has no inputs.json", dir.root().display()))?;
    let opts = PipelineOptions {
        cache: inputs.cache,
        strategy: inputs.strategy,
        max_images: inputs.max_images,
        ..PipelineOptions::default()
    };
    let wanted: BTreeSet<String> = hashes.iter().cloned().collect();
    let options = GenerateOptions {
        store: None,
        points: points_of(dir, &wanted),
        materialise: Some(Materialise {
            dir: out.to_path_buf(),
            hashes: Some(wanted),
        }),
        guidance: reads::recorded_guidance(dir)?,
        ..generate_options(&opts, PathBuf::new())
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    generate_images(&options, &dir.trace(), |_| Ok(()), &mut (), &mut |_| {})?;
    let paths: Vec<PathBuf> = hashes
        .iter()
        .map(|h| ImageStore::image_file(out, h))
        .collect();
    if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
        bail!(
            "no crash image of {} has the hash of {}",
            dir.root().display(),
            missing.display()
        );
    }
    Ok(paths)
}

/// The failure points that made `hashes`, by the run's index; without one, every point.
fn points_of(dir: &RunDir, hashes: &BTreeSet<String>) -> Points {
    let Ok(index) = ImagesIndex::read(&dir.images_index()) else {
        return Points::All;
    };
    let points = &index.failure_points;
    Points::At {
        indices: Arc::new(
            (points.iter())
                .filter(|p| p.images.iter().any(|h| hashes.contains(h)))
                .map(|p| p.index)
                .collect(),
        ),
        recorded: Arc::new(
            (points.iter())
                .filter_map(|p| Some((p.index, p.reads.as_ref()?.fully_persisted.clone())))
                .collect(),
        ),
    }
}
