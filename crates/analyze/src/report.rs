//! The report of one test run: `report.json` for programs, `report.txt` for people.

use crate::verdict::CheckpointVerdict;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `report.json` (the CLI contract of `persim run`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub test: String,
    pub fs: String,
    pub cache: String,
    pub strategy: String,
    pub checkpoints: Vec<CheckpointVerdict>,
    /// Seconds per phase (trace, images, states, total).
    pub timings: BTreeMap<String, f64>,
}

/// The one-letter result of a test in suite tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mark {
    /// ✓ every interval atomic.
    Atomic,
    /// A: single final states, but some interval has more than two states.
    AtomicityViolation,
    /// S: some interval has several final states.
    MultipleFinalStates,
    /// E: the state of some image could not be extracted (recovery error, hang).
    ExtractionError,
    /// C: the guest kernel crashed while recovering some image.
    RecoveryCrash,
}

impl Mark {
    pub fn symbol(self) -> &'static str {
        match self {
            Mark::Atomic => "✓",
            Mark::AtomicityViolation => "A",
            Mark::MultipleFinalStates => "S",
            Mark::ExtractionError => "E",
            Mark::RecoveryCrash => "C",
        }
    }
}

impl Report {
    pub fn violations(&self) -> usize {
        self.checkpoints.iter().filter(|c| c.violated()).count()
    }

    /// The worst finding: a kernel crash, then extraction errors, multiple final
    /// states, atomicity violations.
    pub fn mark(&self) -> Mark {
        let errors = || self.checkpoints.iter().flat_map(|c| &c.errors);
        if errors().any(|e| e.outcome == "guest-crash") {
            Mark::RecoveryCrash
        } else if errors().next().is_some() {
            Mark::ExtractionError
        } else if self.checkpoints.iter().any(|c| !c.single_final_state) {
            Mark::MultipleFinalStates
        } else if self.checkpoints.iter().any(|c| !c.atomic) {
            Mark::AtomicityViolation
        } else {
            Mark::Atomic
        }
    }

    /// `report.txt`: one block per checkpoint interval.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "test {} on {} (cache {}, strategy {}): {}",
            self.test,
            self.fs,
            self.cache,
            self.strategy,
            match self.violations() {
                0 => "no violation".to_string(),
                n => format!("{n} of {} intervals violated", self.checkpoints.len()),
            }
        );
        for c in &self.checkpoints {
            let verdict = if c.atomic {
                "atomic".to_string()
            } else if !c.single_final_state {
                format!("VIOLATION: {} final states", c.final_states.len())
            } else if !c.errors.is_empty() {
                "VIOLATION: recovery failed".to_string()
            } else {
                format!("VIOLATION: not atomic ({} states)", c.states.len())
            };
            let _ = writeln!(t, "\ncheckpoint {} -> {}: {verdict}", c.from, c.to);
            for s in &c.states {
                let final_mark = if c.final_states.contains(&s.name) {
                    " final"
                } else {
                    ""
                };
                let partial = if s.partial_only {
                    " (only from partial images)"
                } else {
                    ""
                };
                let _ = writeln!(
                    t,
                    "  {:<7} {:<15}{final_mark}{partial}  failure points {}; {} image(s)",
                    s.name,
                    s.outcome,
                    abbreviate(&s.failure_points),
                    s.images.len()
                );
            }
            for e in &c.errors {
                let first_line = e.output.lines().next().unwrap_or("");
                let _ = writeln!(t, "  error in {}: {}: {first_line}", e.state, e.outcome);
            }
        }
        if !self.timings.is_empty() {
            let timings: Vec<String> = self
                .timings
                .iter()
                .map(|(k, v)| format!("{k} {v:.1} s"))
                .collect();
            let _ = writeln!(t, "\ntimings: {}", timings.join(", "));
        }
        t
    }
}

/// `1, 5, 9, … (12 in all)` for long lists.
fn abbreviate(points: &[u64]) -> String {
    const SHOWN: usize = 6;
    let shown: Vec<String> = points.iter().take(SHOWN).map(u64::to_string).collect();
    if points.len() > SHOWN {
        format!("{}, … ({} in all)", shown.join(", "), points.len())
    } else {
        shown.join(", ")
    }
}
