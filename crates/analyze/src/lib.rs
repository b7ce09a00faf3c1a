//! Persim analysis: the states recovered from crash images, verdicts per checkpoint
//! interval, reports, trace debugging, and a trace's persistency-bug patterns and PM access profile.

mod accounting;
mod culprits;
mod debug;
mod diff;
mod fault_plots;
mod faults;
mod final_state;
mod invariant;
mod line_table;
mod owners;
mod patterns;
mod pebs;
mod pmdk_objects;
mod pmdk_rules;
mod profile;
mod profile_plots;
mod report;
mod signature;
mod verdict;
mod written;

pub use accounting::{account, Accounting, By, Counts, Group};
pub use culprits::{find_culprits, Culprit, Relevance};
pub use debug::{
    entries_touching, pending_at, DebugError, PendingDiskWrite, PendingLine, PendingState,
    PendingUnit,
};
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
pub use owners::Owner;
pub use patterns::{find_patterns, Finding, Kind as PatternKind, Patterns, Site};
pub use pebs::{Estimate, Row as EstimateRow};
pub use profile::{profile, Derived, Part, Profile, Series, Stats};
pub use profile_plots::profile_svgs;
pub use report::{Mark, NtSummary, Report, RuntimeSummary, Timings};
pub use signature::{signature, without_numbers};
pub use verdict::{
    verdicts, BrokenInvariant, CheckpointVerdict, ErrorInfo, ImageOrigins, InvariantVerdict, Media,
    StateInfo, StateLines,
};
pub use written::{Written, WrittenClass, WrittenLine, DEFAULT_DATA_WRITERS};
