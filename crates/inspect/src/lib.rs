//! Persim's trace analysis: what a trace says without recovering anything — its
//! persistency-bug patterns and PMDK's programming rules (whose code each finding is in),
//! how it uses PM (profiles, accounting per process and function, the PEBS estimator, with
//! their plots), the bytes it wrote, and the model's pending state at any entry (trace
//! debugging). Judging recovered states is `persim-analyze`'s.

mod accounting;
pub mod conjure;
mod debug;
mod line_table;
mod owners;
mod patterns;
mod pebs;
mod pmdk_objects;
mod pmdk_rules;
mod profile;
mod profile_plots;
mod written;

pub use accounting::{account, Accounting, By, Counts, Group};
pub use debug::{
    entries_touching, pending_at, DebugError, PendingDiskWrite, PendingLine, PendingState,
    PendingUnit,
};
pub use owners::Owner;
pub use patterns::{find_patterns, Finding, Kind as PatternKind, Patterns, Site};
pub use pebs::{Estimate, Row as EstimateRow};
pub use profile::{profile, Derived, Part, Profile, Series, Stats};
pub use profile_plots::{plot_error, profile_svgs};
pub use written::{Written, WrittenClass, WrittenLine, DEFAULT_DATA_WRITERS};
