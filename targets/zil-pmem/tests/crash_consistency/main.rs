//! Crash consistency of the ZIL-PMEM log engine, proved with Persim's crash model in
//! process.
//!
//! A run formats a small log, records the trace of a consumer's puts and txg syncs with
//! persim-ringbuf's `Tracing` access, and replays it through the crash model
//! (`persim_model`). Every crash image is opened, claimed and replayed as after a restart,
//! and checked against what the run had written and acknowledged when it crashed (see
//! `oracle`). The correct build must pass every check; each mutant build
//! (`--features mutant-...`) must fail one, which `mutants` asserts.

mod checker;
mod flipped_bit;
mod oracle;
mod run;
mod scenarios;

#[cfg(not(any(
    feature = "mutant-no-drain-between-body-and-header",
    feature = "mutant-no-zero-next-header",
    feature = "mutant-no-zero-freed-chunk",
    feature = "mutant-no-body-checksum"
)))]
mod correct;
#[cfg(any(
    feature = "mutant-no-drain-between-body-and-header",
    feature = "mutant-no-zero-next-header",
    feature = "mutant-no-zero-freed-chunk",
    feature = "mutant-no-body-checksum"
))]
mod mutants;
#[cfg(not(any(
    feature = "mutant-no-drain-between-body-and-header",
    feature = "mutant-no-zero-next-header",
    feature = "mutant-no-zero-freed-chunk",
    feature = "mutant-no-body-checksum"
)))]
mod props;

use persim_model::Strategy;

const STRATEGIES: [Strategy; 2] = [Strategy::Exhaustive, Strategy::GlobalPrefix];
