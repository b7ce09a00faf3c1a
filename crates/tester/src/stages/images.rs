//! The images stage: the crash images of the run's trace into its image store, and their
//! failure points into `images.json` (which appears only when the generation is
//! complete). The engine is `persim_image::generate_images`; this stage chooses its
//! options and guidance.

use super::{reads, Run};
use crate::options::PipelineOptions;
use crate::progress::{Event, Observer, Pass, Stage};
use crate::rundir::RunDir;
use anyhow::{bail, Context, Result};
use persim_image::{
    generate_images, GenerateOptions, Guidance, ImageStore, ImagesIndex, ImagesJsonWriter,
    NtPrefixesAt,
};
use persim_model::Strategy;
use persim_trace::atomic_file::create_atomically;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The options of a run's image generation into `store`.
pub fn generate_options(p: &PipelineOptions, store: PathBuf) -> GenerateOptions {
    GenerateOptions {
        cache: p.cache,
        strategy: p.strategy,
        max_images: p.max_images,
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
/// trace for `pass`).
pub(super) fn generate(run: &mut Run, guidance: Guidance, pass: Pass) -> Result<()> {
    run.replaying(pass);
    run.index = None;
    let dir = run.dir;
    let options = GenerateOptions {
        guidance,
        ..generate_options(run.opts, dir.image_store())
    };
    let observer: &mut dyn Observer = run.observer;
    let mut failure = None;
    let written = create_atomically(&dir.images_index(), |file| {
        let mut writer = ImagesJsonWriter::new(BufWriter::new(file));
        let generated =
            generate_images(&options, &dir.trace(), |_| Ok(()), &mut writer, &mut |p| {
                observer.event(&Event::replayed(p))
            });
        match generated {
            Ok(generated) => writer.finish(&generated.images)?.flush(),
            Err(e) => {
                failure = Some(e);
                Err(io::Error::other("image generation failed"))
            }
        }
    });
    if let Some(e) = failure {
        return Err(e.into());
    }
    Ok(written?)
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
    let options = GenerateOptions {
        store: None,
        materialise: Some((hashes.iter().cloned().collect(), out.to_path_buf())),
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
