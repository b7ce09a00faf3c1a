//! Persim analysis: the states recovered from crash images, verdicts per checkpoint
//! interval, reports, and trace debugging.

mod debug;
mod diff;
mod report;
mod verdict;

pub use debug::{entries_touching, pending_at, DebugError, PendingLine, PendingState, PendingUnit};
pub use diff::line_diff;
pub use report::{Mark, Report, Timings};
pub use verdict::{verdicts, CheckpointVerdict, ErrorInfo, ImageOrigins, StateInfo};
