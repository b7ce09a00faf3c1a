//! The reference stage (`--reference`): the test's setup and operations traced on the
//! reference configuration, and the fully persisted image of each of its checkpoints
//! recovered there, so that its states come from the same recovery, fs-dump and
//! normalisation as the tested system's final states, without a crash.

use super::{generate_options, Run};
use crate::progress::{Pass, Stage};
use anyhow::{bail, Context, Result};
use persim_analyze::ReferenceStates;
use persim_image::{fully_persisted_images, ImageStore};
use persim_model::FailureKind;
use persim_trace::atomic_file::write_atomically;
use std::collections::BTreeMap;

/// The reference's state at each checkpoint: recovered now, or read back; None without a
/// reference.
pub(super) fn reference(run: &mut Run) -> Result<Option<ReferenceStates>> {
    let Some(reference) = run.guest.reference() else {
        return Ok(None);
    };
    let dir = run.dir;
    let done = dir.reference_states().is_file();
    run.timings.reference = run.stage(Stage::Reference, done, |run| {
        let test = run.test;
        let recording = dir.reference_recording();
        std::fs::create_dir_all(dir.reference())
            .with_context(|| format!("cannot create {}", dir.reference().display()))?;
        if !recording.is_complete() {
            let recorded = reference
                .record(&test.setup, &test.command(), recording.trace())
                .with_context(|| {
                    format!("tracing the test on the reference {}", reference.name())
                })?;
            write_atomically(
                &dir.reference_output(),
                test.output_by_operation(&recorded.output).as_bytes(),
            )?;
            if recorded.exit_code != 0 {
                recording.remove();
                bail!(
                    "on the reference {}: {}",
                    reference.name(),
                    test.failure(recorded.exit_code, &recorded.output)
                );
            }
        }
        // The state after each operation: the fully persisted image at each checkpoint's
        // hypercall from checkpoint 2 on.
        let images = dir.reference_images();
        run.replaying(Pass::Reference);
        let mut made = fully_persisted_images(
            &generate_options(run.opts, Default::default()),
            recording.trace(),
            &[FailureKind::Checkpoint],
            &images,
            &mut |_| {},
        )?;
        let checkpoints: BTreeMap<u64, String> = made.checkpoints.split_off(&2);
        let paths: Vec<_> = (checkpoints.values())
            .map(|hash| ImageStore::image_file(&images, hash))
            .collect();
        let recovered = reference.extract(test, &paths, false, &mut |_, _| {})?;
        let mut at = BTreeMap::new();
        for (&checkpoint, extracted) in checkpoints.keys().zip(recovered) {
            if extracted.state.is_error() {
                let first = extracted.state.text().lines().next().unwrap_or("");
                bail!(
                    "the reference {} did not recover its state at checkpoint {checkpoint} \
                     ({}: {first}); a reference must recover the operations' results without a \
                     crash: give another --reference",
                    reference.name(),
                    extracted.state.outcome()
                );
            }
            at.insert(checkpoint, extracted.state);
        }
        let states = ReferenceStates {
            config: reference.name().to_owned(),
            at,
        };
        write_atomically(
            &dir.reference_states(),
            &serde_json::to_vec_pretty(&states)?,
        )?;
        // Only the states are needed again: a campaign's run directories stay small.
        recording.remove();
        std::fs::remove_dir_all(&images)
            .with_context(|| format!("cannot remove {}", images.display()))
    })?;
    dir.read_reference_states()
}
