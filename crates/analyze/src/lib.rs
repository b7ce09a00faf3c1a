//! Persim analysis: the states recovered from crash images, verdicts per checkpoint
//! interval, reports, and trace debugging.

mod state;
mod verdict;

pub use state::Recovered;
pub use verdict::{verdicts, CheckpointVerdict, ErrorInfo, ImageOrigins, StateInfo};
