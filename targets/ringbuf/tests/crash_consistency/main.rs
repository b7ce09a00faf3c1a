//! Crash consistency of the ring buffer, proved with Persim's crash model in process.
//!
//! A run formats a small log, records the trace of a sequence of appends and releases with
//! the [`persim_ringbuf::Tracing`] access, and replays it through the crash model
//! (`persim_model`). Every crash image the model produces is opened and recovered as after a
//! restart, and checked against what the run had appended and acknowledged when it crashed
//! (see `oracle`). The correct build must pass every check; each mutant build
//! (`--features mutant-...`) must fail one, which `mutants` asserts.

mod checker;
mod oracle;
mod patterns;
mod run;
mod scenarios;

#[cfg(not(any(
    feature = "mutant-no-first-fence",
    feature = "mutant-no-second-fence",
    feature = "mutant-no-zero-next-header"
)))]
mod correct;
#[cfg(any(
    feature = "mutant-no-first-fence",
    feature = "mutant-no-second-fence",
    feature = "mutant-no-zero-next-header"
))]
mod mutants;
#[cfg(not(any(
    feature = "mutant-no-first-fence",
    feature = "mutant-no-second-fence",
    feature = "mutant-no-zero-next-header"
)))]
mod props;

use persim_model::Strategy;

const STRATEGIES: [Strategy; 3] = [
    Strategy::Exhaustive,
    Strategy::GlobalPrefix,
    Strategy::ProgramOrder,
];
