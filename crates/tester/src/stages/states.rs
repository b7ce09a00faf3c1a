//! The states stage: recover every distinct crash image in the guest, keeping each result
//! as a state file as soon as it is known, so an interrupted run resumes after it.

use super::{images, Run};
use crate::progress::{Event, Pass, Stage};
use crate::rundir::RunDir;
use anyhow::{Context, Result};
use persim_image::{ImageStore, NtPrefixesAt};
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use persim_vm::Extracted;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The run's image store and the state of each of its images: those saved as they are,
/// the others recovered (their files made again first if they are gone).
pub(super) fn states(
    run: &mut Run,
    nt_at: &NtPrefixesAt,
) -> Result<(ImageStore, BTreeMap<String, Recovered>)> {
    let dir = run.dir;
    let mut store = ImageStore::open(dir.image_store())?;
    let mut saved = saved_states(dir, &store);
    if saved.lost_images() {
        // Images without a state whose files are gone: a replay writes them again.
        let guidance = images::guidance(run, nt_at)?;
        images::generate(run, guidance, Pass::Images)?;
        store = ImageStore::open(dir.image_store())?;
        saved = saved_states(dir, &store);
    }
    let states = extract_missing(run, saved)?;
    Ok((store, states))
}

/// The state of every image by hash: the `saved` ones as they are, the others recovered,
/// each image file deleted once its state is saved unless `keep_images`.
fn extract_missing(run: &mut Run, saved: SavedStates) -> Result<BTreeMap<String, Recovered>> {
    let SavedStates { mut known, missing } = saved;
    if missing.is_empty() {
        return Ok(known);
    }
    let how = Recovery {
        reads: false,
        keep_images: run.opts.keep_images,
        stage: Stage::States,
        done_of: None,
    };
    let results = recover_and_save(run, &missing, how, &mut |_, _| Ok(()))?;
    let states = results.into_iter().map(|e| e.state);
    known.extend(missing.into_iter().map(|(hash, _)| hash).zip(states));
    Ok(known)
}

/// The states a run directory holds for the images of its store.
struct SavedStates {
    /// Saved states by image hash.
    known: BTreeMap<String, Recovered>,
    /// Images (hash, file) without a state.
    missing: Vec<(String, PathBuf)>,
}

impl SavedStates {
    /// Whether some image has neither a state nor its file.
    fn lost_images(&self) -> bool {
        self.missing.iter().any(|(_, file)| !file.is_file())
    }
}

/// How [`recover_and_save`] runs.
pub(super) struct Recovery {
    /// Also trace what recovery reads.
    pub reads: bool,
    pub keep_images: bool,
    /// The stage its progress belongs to.
    pub stage: Stage,
    /// Of the stage's images, how many were done before this call, and how many there
    /// are (default: none, and this call's).
    pub done_of: Option<(usize, usize)>,
}

/// Recovers the `images` (hash, file) in the guest and saves each state as soon as it is
/// known, with `also_save(hash, result)` for more; each image file is deleted once saved,
/// unless `keep_images` (it can be made again from the trace; the run directory stays
/// small).
pub(super) fn recover_and_save(
    run: &mut Run,
    images: &[(String, PathBuf)],
    how: Recovery,
    also_save: &mut dyn FnMut(&str, &Extracted) -> Result<()>,
) -> Result<Vec<Extracted>> {
    let dir = run.dir;
    std::fs::create_dir_all(dir.states())
        .with_context(|| format!("cannot create {}", dir.states().display()))?;
    let paths: Vec<PathBuf> = images.iter().map(|(_, path)| path.clone()).collect();
    let (mut done, total) = how.done_of.unwrap_or((0, paths.len()));
    run.timings.recoveries += paths.len();
    if how.reads {
        run.timings.traced += paths.len();
    }
    let mut write_error = None;
    let observer = &mut *run.observer;
    let results = run
        .guest
        .extract(run.test, &paths, how.reads, &mut |i, extracted| {
            let (hash, image) = &images[i];
            let saved = serde_json::to_vec(&extracted.state)
                .map_err(anyhow::Error::from)
                .and_then(|json| Ok(write_atomically(&dir.state(hash), &json)?))
                .and_then(|()| also_save(hash, extracted));
            match saved {
                Ok(()) if !how.keep_images => drop(std::fs::remove_file(image)),
                Ok(()) => {}
                Err(e) => drop(write_error.get_or_insert(e)),
            }
            done += 1;
            observer.event(&Event::Recovered {
                stage: how.stage,
                done,
                total,
            });
        })?;
    match write_error {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

/// The states saved in `dir` for the images of `store`.
fn saved_states(dir: &RunDir, store: &ImageStore) -> SavedStates {
    let mut known = BTreeMap::new();
    let mut missing = Vec::new();
    for (hash, _) in store.records() {
        let hex = hash.to_hex().to_string();
        match saved_state(dir, &hex) {
            Some(state) => drop(known.insert(hex, state)),
            None => missing.push((hex, store.image_path(&hash))),
        }
    }
    SavedStates { known, missing }
}

/// The state saved in `dir` for the image `hash`; None when there is none or it cannot be
/// read back (e.g. from an older Persim).
pub(super) fn saved_state(dir: &RunDir, hash: &str) -> Option<Recovered> {
    read_state(&dir.state(hash))
}

/// A state file read back; None when there is none or it cannot be read.
pub(crate) fn read_state(path: &std::path::Path) -> Option<Recovered> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}
