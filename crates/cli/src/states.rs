//! The states stage of a run: recover every distinct crash image in the VM, keeping each
//! result as DIR/states/<hash>.json as soon as it is known, so a run can resume.

use crate::run::{write_atomically, PipelineArgs};
use crate::testcase::TestCase;
use crate::vm_args::cache_dir;
use anyhow::{Context, Result};
use persim_analyze::Recovered;
use persim_image::ImageStore;
use persim_vm::{extract_states, ExtractOptions, VmConfig};
use std::fs;
use std::path::{Path, PathBuf};

/// Recovers the images of `store` that have no state in `states_dir` yet; returns every
/// image's state by hash.
pub fn extract_missing(
    p: &PipelineArgs,
    config: &VmConfig,
    test: &TestCase,
    store: &ImageStore,
    states_dir: &Path,
) -> Result<Vec<(String, Recovered)>> {
    fs::create_dir_all(states_dir)
        .with_context(|| format!("cannot create {}", states_dir.display()))?;
    let mut known = Vec::new();
    let mut missing: Vec<(String, PathBuf)> = Vec::new();
    for (hash, _) in store.records() {
        let path = states_dir.join(format!("{}.json", hash.to_hex()));
        match fs::read_to_string(&path) {
            Ok(text) => known.push((
                hash.to_hex().to_string(),
                serde_json::from_str(&text)
                    .with_context(|| format!("{} is malformed", path.display()))?,
            )),
            Err(_) => missing.push((hash.to_hex().to_string(), store.image_path(&hash))),
        }
    }
    if missing.is_empty() {
        return Ok(known);
    }
    let mut options = ExtractOptions::new(config.clone(), p.vm.artifacts()?, cache_dir());
    options.dump.command = test.state.clone();
    options.dump.ignore = test.ignore.clone();
    options.dump.exclude = vec!["lost+found".to_string()];
    options.timeout = p.vm.timeout();
    if let Some(jobs) = p.jobs {
        options.jobs = jobs;
    }
    let paths: Vec<PathBuf> = missing.iter().map(|(_, path)| path.clone()).collect();
    let total = paths.len();
    let mut done = 0;
    let mut write_error = None;
    // Each state is saved as it arrives, so an interrupted run resumes after it.
    let results = extract_states(&options, &paths, |i, recovered| {
        let path = states_dir.join(format!("{}.json", missing[i].0));
        let saved = serde_json::to_string(recovered)
            .map_err(anyhow::Error::from)
            .and_then(|json| write_atomically(&path, json.as_bytes()));
        if let Err(e) = saved {
            write_error.get_or_insert(e);
        }
        done += 1;
        if !p.quiet {
            eprintln!("persim: states: {done}/{total} images recovered");
        }
    })?;
    if let Some(e) = write_error {
        return Err(e);
    }
    known.extend(missing.into_iter().map(|(hash, _)| hash).zip(results));
    Ok(known)
}
