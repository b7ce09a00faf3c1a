//! The first pass of the `reads` strategy (docs/model.md, "Recovery-guided images"): the
//! fully persisted image of every failure point, and the PM lines its recovery loads.
//! The distinct images are collected first and their recoveries traced on the extraction
//! workers in parallel (the thesis traced them one after another). Their states are kept
//! as well: each fully persisted image is also a crash image of the second pass.

use crate::guest::Guest;
use crate::images::generate_images;
use crate::images_index::ImagesIndex;
use crate::options::{Guidance, ImagesOptions, PipelineOptions, ReadSets};
use crate::progress::{Event, Observer, Stage};
use crate::rundir::RunDir;
use crate::states::{recover_and_save, Recovery};
use crate::testcase::TestCase;
use anyhow::{Context, Result};
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use persim_vm::Extracted;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

/// `reads/<hash>.json`: what one traced recovery read of its image.
#[derive(Debug, Serialize, Deserialize)]
struct SavedReads {
    /// PM offsets of the aligned 8-byte words loaded before recovery wrote them,
    /// ascending; null when unknown (the recovery crashed the guest or hung).
    words: Option<Vec<u64>>,
}

/// The read set of every failure point's fully persisted image: traced now, or read back
/// from an earlier (interrupted) run. With `keep_images` off, each image file is deleted
/// once its results are saved.
pub fn read_sets(
    opts: &PipelineOptions,
    guest: &dyn Guest,
    test: &TestCase,
    dir: &RunDir,
    observer: &mut dyn Observer,
) -> Result<ReadSets> {
    let started = Instant::now();
    let store = dir.fully_persisted_store();
    let options = ImagesOptions {
        guidance: Guidance::FullyPersisted,
        ..ImagesOptions::for_run(opts, store.clone())
    };
    let images = generate_images(&options, &dir.trace(), |_| Ok(()), &mut (), observer)?.images;
    let mut sets = ReadSets::new();
    let mut missing: Vec<(String, PathBuf)> = Vec::new();
    for hash in images.into_keys() {
        match saved(dir, &hash) {
            Some(lines) => drop(sets.insert(hash, lines)),
            None => {
                let image = store.join(format!("{hash}.img"));
                missing.push((hash, image));
            }
        }
    }
    if missing.is_empty() {
        observer.event(&Event::Reused(Stage::Reads));
        return Ok(sets);
    }
    std::fs::create_dir_all(dir.reads())
        .with_context(|| format!("cannot create {}", dir.reads().display()))?;
    let how = Recovery {
        reads: true,
        keep_images: opts.keep_images,
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
    let results = recover_and_save(dir, guest, test, &missing, how, save_reads, observer)?;
    for ((hash, _), extracted) in missing.into_iter().zip(results) {
        sets.insert(hash, extracted.words_read);
    }
    observer.event(&Event::Finished(Stage::Reads, started.elapsed()));
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

/// Every read set saved in `dir` (for making a run's images again).
pub fn saved_read_sets(dir: &RunDir) -> ReadSets {
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

/// `nt-prefixes.json`: where `--nt-prefixes auto` explores NT prefixes, decided once from
/// the states of the images without them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtDecision {
    /// Distinct states before the NT-prefix images.
    pub states_before: usize,
    /// Distinct states that, at some failure point, only images applying NT stores gave.
    pub dependent_states: usize,
    /// Those failure points (trace indices).
    pub points: BTreeSet<u64>,
}

/// The NT-dependent failure points of a `reads` run (the thesis' Suvi-NT): those where
/// every image that gives some state applies pending NT stores, so the state may hinge
/// on NT stores that, taken all or nothing, were never split.
pub fn nt_dependent(index: &ImagesIndex, states: &BTreeMap<String, Recovered>) -> NtDecision {
    let mut points = BTreeSet::new();
    let mut dependent = BTreeSet::new();
    for point in &index.failure_points {
        let Some(reads) = point.reads.as_ref().filter(|r| !r.nt_prefixes) else {
            continue;
        };
        // per state: whether all of its images here apply NT stores
        let mut only_nt: BTreeMap<&Recovered, bool> = BTreeMap::new();
        for hash in &point.images {
            if let Some(state) = states.get(hash) {
                let nt = reads.nt_images.contains(hash);
                *only_nt.entry(state).or_insert(true) &= nt;
            }
        }
        for (state, only) in only_nt {
            if only {
                points.insert(point.index);
                dependent.insert(state);
            }
        }
    }
    NtDecision {
        states_before: states.values().collect::<BTreeSet<_>>().len(),
        dependent_states: dependent.len(),
        points,
    }
}
