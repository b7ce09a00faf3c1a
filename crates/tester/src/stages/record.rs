//! The record stage: the test's operations run traced in the guest, into the run
//! directory's trace (and the initial images beside it).

use super::Run;
use crate::progress::Stage;
use anyhow::{bail, Result};
use persim_trace::atomic_file::write_atomically;

/// Records the trace unless the directory has it; returns the seconds it took.
pub(super) fn record(run: &mut Run) -> Result<Option<f64>> {
    let dir = run.dir;
    let done = dir.recording().is_complete();
    run.stage(Stage::Trace, done, |run| {
        let test = run.test;
        write_atomically(&dir.test(), toml::to_string(test)?.as_bytes())?;
        let recording = run
            .guest
            .record(&test.setup, &test.command(), &dir.trace())
            .map_err(|e| {
                // A hang or a crash ends the guest's output inside the operation to blame.
                match test.operation_at_end(&format!("{e:#}")) {
                    Some(op) => e.context(format!("the traced run stopped in {op}")),
                    None => e,
                }
            })?;
        let output = test.output_by_operation(&recording.output);
        write_atomically(&dir.output(), output.as_bytes())?;
        if recording.exit_code != 0 {
            // The workload did not run as written: nothing of it is a result.
            dir.recording().remove();
            bail!("{}", test.failure(recording.exit_code, &recording.output));
        }
        Ok(())
    })
}
