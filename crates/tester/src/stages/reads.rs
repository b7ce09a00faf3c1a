//! The first pass of the `reads` strategy (docs/design/model.md, "Recovery-guided images"): the
//! fully persisted image of every failure point, and the PM lines its recovery loads.
//! The distinct images are collected first and their recoveries traced on the extraction
//! workers in parallel (the thesis traced them one after another). Their states are kept
//! as well: each fully persisted image is also a crash image of the second pass.

use super::states::{recover_and_save, Recovery};
use super::{generate_options, Run};
use crate::options::NtPrefixes;
use crate::progress::{Pass, Stage};
use crate::rundir::RunDir;
use anyhow::{Context, Result};
use persim_image::{
    generate_images, GenerateOptions, Guidance, ImageStore, NtPrefixesAt, ReadSets,
};
use persim_model::Strategy;
use persim_trace::atomic_file::write_atomically;
use persim_vm::Extracted;
use serde::{Deserialize, Serialize};
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
    let images = generate_images(&options, &dir.trace(), |_| Ok(()), &mut (), &mut |p| {
        run.observer.event(&crate::progress::Event::replayed(p))
    })?
    .images;
    let mut sets = ReadSets::new();
    let mut missing: Vec<(String, PathBuf)> = Vec::new();
    for hash in images.into_keys() {
        match saved(dir, &hash) {
            Some(lines) => drop(sets.insert(hash, lines)),
            None => {
                let image = ImageStore::image_file(&store, &hash);
                missing.push((hash, image));
            }
        }
    }
    run.stage(Stage::Reads, missing.is_empty(), |run| {
        std::fs::create_dir_all(dir.reads())
            .with_context(|| format!("cannot create {}", dir.reads().display()))?;
        let how = Recovery {
            reads: true,
            keep_images: run.opts.keep_images,
            stage: Stage::Reads,
        };
        let save_reads = &mut |hash: &str, extracted: &Extracted| {
            let reads = SavedReads {
                words: extracted.words_read.clone(),
            };
            Ok(write_atomically(
                &dir.read_set(hash),
                &serde_json::to_vec(&reads)?,
            )?)
        };
        let results = recover_and_save(run, &missing, how, save_reads)?;
        for ((hash, _), extracted) in missing.into_iter().zip(results) {
            sets.insert(hash, extracted.words_read);
        }
        Ok(())
    })?;
    run.timings.reads = Some(started.elapsed().as_secs_f64());
    let sets = Arc::new(sets);
    run.read_sets = Some(Arc::clone(&sets));
    Ok(sets)
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
