//! The first pass of the `reads` strategy (docs/design/model.md, "Recovery-guided images"): the
//! fully persisted image of every failure point, and the PM lines its recovery loads.
//! The distinct images are collected first and their recoveries traced on the extraction
//! workers in parallel (the thesis traced them one after another). Their states are kept
//! as well: each fully persisted image is also a crash image of the second pass.

use super::states::{recover_and_save, Recovery};
use super::traced::{share_state, Traced};
use super::{generate_options, Run};
use crate::options::NtPrefixes;
use crate::progress::Event;
use crate::progress::{Pass, Stage};
use crate::rundir::RunDir;
use anyhow::{Context, Result};
use persim_image::{
    generate_images, GenerateOptions, Guidance, Image, ImageStore, NtPrefixesAt, PointRecord,
    PointSink, ReadSets,
};
use persim_model::Strategy;
use persim_trace::atomic_file::write_atomically;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// `reads/<hash>.json`: what one traced recovery read of its image.
#[derive(Debug, Serialize, Deserialize)]
struct SavedReads {
    /// PM offsets of the aligned 8-byte words loaded before recovery wrote them,
    /// ascending; null when unknown (the recovery crashed the guest or hung).
    words: Option<Vec<u64>>,
}

/// The read set of every failure point's fully persisted image: traced now, or read back
/// from an earlier (interrupted) run; once per run, however many passes use them. With
/// `keep_images` off, each image file is deleted once its results are saved.
pub(super) fn read_sets(run: &mut Run) -> Result<Arc<ReadSets>> {
    if let Some(sets) = &run.read_sets {
        return Ok(Arc::clone(sets));
    }
    let started = Instant::now();
    let dir = run.dir;
    let store = dir.fully_persisted_store();
    let options = GenerateOptions {
        guidance: Guidance::FullyPersistedToGuide,
        ..generate_options(run.opts, store.clone())
    };
    run.replaying(Pass::FullyPersisted);
    let mut made = Made::default();
    let generated = generate_images(&options, &dir.trace(), |_| Ok(()), &mut made, &mut |p| {
        run.observer.event(&crate::progress::Event::replayed(p))
    })?;
    let mut sets = ReadSets::new();
    let mut missing = Vec::new();
    for (hash, image) in made.images {
        match saved(dir, &hash) {
            Some(lines) => drop(sets.insert(hash, lines)),
            None => missing.push(Unread {
                file: ImageStore::image_file(&store, &hash),
                hash,
                image,
            }),
        }
    }
    run.stage(Stage::Reads, missing.is_empty(), |run| {
        std::fs::create_dir_all(dir.reads())
            .with_context(|| format!("cannot create {}", dir.reads().display()))?;
        let mut traced = Traced::new(generated.config.pm_size);
        trace_or_share(run, missing, &mut traced, &mut sets)?;
        run.traced = traced;
        Ok(())
    })?;
    run.timings.reads = Some(started.elapsed().as_secs_f64());
    let sets = Arc::new(sets);
    run.read_sets = Some(Arc::clone(&sets));
    Ok(sets)
}

/// The distinct images of a generation, in the order they were made, with their contents.
#[derive(Default)]
struct Made {
    images: Vec<(String, Image)>,
    seen: HashSet<String>,
}

impl PointSink for Made {
    fn point(&mut self, _: &PointRecord) -> io::Result<()> {
        Ok(())
    }

    fn stored(&mut self, hash: &str, image: &Image) -> io::Result<()> {
        if self.seen.insert(hash.to_owned()) {
            self.images.push((hash.to_owned(), image.clone()));
        }
        Ok(())
    }
}

/// A fully persisted image without a read set yet.
struct Unread {
    hash: String,
    file: PathBuf,
    image: Image,
}

/// Traces the recoveries of `missing` (in the order they were made) a batch of
/// `run.guest.workers()` at a time, spread over those left, into `sets`; an image like one
/// traced already (`Traced::like`) takes its read set and state instead.
fn trace_or_share(
    run: &mut Run,
    mut missing: Vec<Unread>,
    traced: &mut Traced,
    sets: &mut ReadSets,
) -> Result<()> {
    let dir = run.dir;
    let keep_images = run.opts.keep_images;
    let total = missing.len();
    let mut done = 0;
    while !missing.is_empty() {
        let mut batch = Vec::new();
        let spread = run.guest.workers().min(missing.len());
        for i in (0..spread).rev() {
            batch.push(missing.remove(i * missing.len() / spread));
        }
        let files: Vec<(String, PathBuf)> = batch
            .iter()
            .map(|u| (u.hash.clone(), u.file.clone()))
            .collect();
        let how = Recovery {
            reads: true,
            keep_images,
            stage: Stage::Reads,
            done_of: Some((done, total)),
        };
        let results = recover_and_save(run, &files, how, &mut |hash, extracted| {
            save_reads(dir, hash, &extracted.words_read)
        })?;
        done += batch.len();
        for (unread, extracted) in batch.into_iter().zip(results) {
            sets.insert(unread.hash.clone(), extracted.words_read.clone());
            if let Some(words) = extracted.words_read {
                traced.add(unread.hash, unread.image, words);
            }
        }
        let mut left = Vec::new();
        for unread in missing {
            let Some(like) = traced.like(&unread.image) else {
                left.push(unread);
                continue;
            };
            share_state(dir, &like.hash, &unread.hash)?;
            save_reads(dir, &unread.hash, &Some(like.words.clone()))?;
            if !keep_images {
                drop(std::fs::remove_file(&unread.file));
            }
            sets.insert(unread.hash, Some(like.words.clone()));
            run.timings.shared += 1;
            done += 1;
            run.observer.event(&Event::Recovered {
                stage: Stage::Reads,
                done,
                total,
            });
        }
        missing = left;
    }
    Ok(())
}

/// Saves what the recovery of image `hash` read.
fn save_reads(dir: &RunDir, hash: &str, words: &Option<Vec<u64>>) -> Result<()> {
    let reads = SavedReads {
        words: words.clone(),
    };
    Ok(write_atomically(
        &dir.read_set(hash),
        &serde_json::to_vec(&reads)?,
    )?)
}

/// The saved read set of an image whose state is saved too; None when either is missing
/// or unreadable.
fn saved(dir: &RunDir, hash: &str) -> Option<Option<Vec<u64>>> {
    if !dir.state(hash).is_file() {
        return None;
    }
    let text = std::fs::read(dir.read_set(hash)).ok()?;
    serde_json::from_slice::<SavedReads>(&text)
        .ok()
        .map(|saved| saved.words)
}

/// How the run in `dir` guided `reads` (its read sets and where it explored NT prefixes),
/// to make its images again; `Unguided` for the other strategies.
pub fn recorded_guidance(dir: &RunDir) -> Result<Guidance> {
    let inputs = dir
        .read_inputs()?
        .with_context(|| format!("{} has no inputs.json", dir.root().display()))?;
    if inputs.strategy != Strategy::Reads {
        return Ok(Guidance::Unguided);
    }
    let nt_at = match (inputs.nt_prefixes, dir.read_nt_decision()?) {
        (NtPrefixes::All, _) => NtPrefixesAt::Everywhere,
        (_, Some(decided)) => NtPrefixesAt::Points(Arc::new(decided.points)),
        (_, None) => NtPrefixesAt::Nowhere,
    };
    Ok(Guidance::ReadSets(Arc::new(saved_read_sets(dir)), nt_at))
}

/// Every read set saved in `dir`.
fn saved_read_sets(dir: &RunDir) -> ReadSets {
    let Ok(files) = std::fs::read_dir(dir.reads()) else {
        return ReadSets::new();
    };
    files
        .flatten()
        .filter_map(|file| {
            let name = file.file_name().into_string().ok()?;
            let hash = name.strip_suffix(".json")?;
            Some((hash.to_owned(), saved(dir, hash)?))
        })
        .collect()
}
