//! Persim's judging: the states recovered from crash images, verdicts per checkpoint
//! interval, reports and their signatures, the code behind each violation, final states
//! against a reference or the test's `expect`, invariants, and the outcome of each media
//! fault. What a trace says on its own is `persim-inspect`'s.

mod compare;
mod culprits;
mod diff;
mod fault_plots;
mod faults;
mod final_state;
mod invariant;
mod report;
mod signature;
mod verdict;

pub use compare::{IntervalStates, StatesComparison};
pub use culprits::{find_culprits, Culprit, Relevance};
pub use diff::line_diff;
pub use fault_plots::fault_summary_svg;
pub use faults::{
    classify_fault, detection_messages, state_bytes_lost, FaultOutcome, FaultRow, FaultSummary,
    FaultTally,
};
pub use final_state::{
    check_final_states, Expect, Expected, FinalCheck, FinalDifference, ReferenceStates,
    REFERENCE_LEAVES_OUT, REFERENCE_LEAVES_OUT_OF_DIRS,
};
pub use invariant::{BadInvariant, Invariant};
pub use report::{
    abbreviate, culprits_by_kind, telling_lines, verdict_label, Mark, NtSummary, Report,
    RuntimeSummary, Timings,
};
pub use signature::{signature, without_numbers};
pub use verdict::{
    verdicts, BrokenInvariant, CheckpointVerdict, ErrorInfo, ImageOrigins, InvariantVerdict, Media,
    StateInfo, StateLines,
};
