//! The states stage: recover every distinct crash image in the guest, keeping each result
//! as a state file as soon as it is known, so an interrupted run resumes after it.

use crate::guest::Guest;
use crate::progress::{Event, Observer, Stage};
use crate::rundir::RunDir;
use crate::testcase::TestCase;
use anyhow::{Context, Result};
use persim_image::ImageStore;
use persim_trace::atomic_file::write_atomically;
use persim_vm::Recovered;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The state of every image by hash: the `saved` ones as they are, the others recovered,
/// each image file deleted once its state is saved unless `keep_images`.
pub fn extract_missing(
    dir: &RunDir,
    saved: SavedStates,
    guest: &dyn Guest,
    test: &TestCase,
    keep_images: bool,
    observer: &mut dyn Observer,
) -> Result<BTreeMap<String, Recovered>> {
    let states_dir = dir.states();
    std::fs::create_dir_all(&states_dir)
        .with_context(|| format!("cannot create {}", states_dir.display()))?;
    let SavedStates { mut known, missing } = saved;
    if missing.is_empty() {
        return Ok(known);
    }
    let paths: Vec<PathBuf> = missing.iter().map(|(_, path)| path.clone()).collect();
    let total = paths.len();
    let mut done = 0;
    let mut write_error = None;
    let results = guest.extract(test, &paths, false, &mut |i, extracted| {
        let path = dir.state(&missing[i].0);
        let saved = serde_json::to_vec(&extracted.state)
            .map_err(anyhow::Error::from)
            .and_then(|json| Ok(write_atomically(&path, &json)?));
        match saved {
            // The image can be made again from the trace; the run directory stays small.
            Ok(()) if !keep_images => drop(std::fs::remove_file(&missing[i].1)),
            Ok(()) => {}
            Err(e) => drop(write_error.get_or_insert(e)),
        }
        done += 1;
        observer.event(&Event::Recovered {
            stage: Stage::States,
            done,
            total,
        });
    })?;
    if let Some(e) = write_error {
        return Err(e);
    }
    let states = results.into_iter().map(|e| e.state);
    known.extend(missing.into_iter().map(|(hash, _)| hash).zip(states));
    Ok(known)
}

/// The states a run directory holds for the images of its store.
pub struct SavedStates {
    /// Saved states by image hash.
    pub known: BTreeMap<String, Recovered>,
    /// Images (hash, file) without a state.
    pub missing: Vec<(String, PathBuf)>,
}

impl SavedStates {
    /// Whether some image has neither a state nor its file.
    pub fn lost_images(&self) -> bool {
        self.missing.iter().any(|(_, file)| !file.is_file())
    }
}

/// The states saved in `dir` for the images of `store`. A state file that cannot be read
/// back (e.g. from an older Persim) counts as none.
pub fn saved_states(dir: &RunDir, store: &ImageStore) -> SavedStates {
    let mut known = BTreeMap::new();
    let mut missing = Vec::new();
    for (hash, _) in store.records() {
        let hex = hash.to_hex().to_string();
        let saved = std::fs::read(dir.state(&hex))
            .ok()
            .and_then(|text| serde_json::from_slice::<Recovered>(&text).ok());
        match saved {
            Some(state) => drop(known.insert(hex, state)),
            None => missing.push((hex, store.image_path(&hash))),
        }
    }
    SavedStates { known, missing }
}
