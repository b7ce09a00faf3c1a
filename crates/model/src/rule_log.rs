//! What a mechanism keeps of its ordering rules: the violations not yet handed on, and
//! whether one was ever broken (from then on the mechanism protects nothing).

use crate::jbd2::{JournalViolation, LogKind};

#[derive(Debug)]
pub(crate) struct RuleLog {
    log: LogKind,
    violations: Vec<JournalViolation>,
    broken: bool,
}

impl RuleLog {
    pub(crate) fn new(log: LogKind) -> RuleLog {
        RuleLog {
            log,
            violations: Vec::new(),
            broken: false,
        }
    }

    pub(crate) fn holds(&self) -> bool {
        !self.broken
    }

    pub(crate) fn take(&mut self) -> Vec<JournalViolation> {
        std::mem::take(&mut self.violations)
    }

    /// Rule `rule` broken by trace entry `entry`; `sequence` and `lines` as
    /// [`JournalViolation`] describes them for this log.
    pub(crate) fn broke(&mut self, entry: u64, rule: u8, sequence: u64, lines: Vec<u64>) {
        self.broken = true;
        self.violations.push(JournalViolation {
            log: self.log,
            entry,
            rule,
            sequence: u32::try_from(sequence).unwrap_or(u32::MAX),
            lines,
        });
    }
}
