//! The file system's consistency mechanism a replay follows under `Scope::Program`: a
//! jbd2 journal or an XFS log, as the initial image's on-media format gives it.

use crate::config::Config;
use crate::jbd2::{Journal, JournalViolation};
use crate::pending::PmPending;
use crate::xfs_log::XfsLog;

#[derive(Debug)]
pub enum Mechanism {
    Jbd2(Journal),
    Xfs(XfsLog),
}

impl Mechanism {
    /// The mechanism `config` names, if any (a jbd2 journal first).
    pub fn of(config: &Config) -> Option<Mechanism> {
        match (&config.journal, &config.xfs_log) {
            (Some(journal), _) => Some(Mechanism::Jbd2(Journal::new(journal.clone()))),
            (None, Some(log)) => Some(Mechanism::Xfs(XfsLog::new(log.clone()))),
            (None, None) => None,
        }
    }

    pub fn store(&mut self, addr: u64, data: &[u8], entry: u64, pending: &PmPending) {
        match self {
            Mechanism::Jbd2(j) => j.store(addr, data, entry, pending),
            Mechanism::Xfs(x) => x.store(addr, data, entry, pending),
        }
    }

    pub fn fenced(&mut self, pending: &PmPending) {
        match self {
            Mechanism::Jbd2(j) => j.fenced(pending),
            Mechanism::Xfs(x) => x.fenced(pending),
        }
    }

    pub fn holds_so_far(&self) -> bool {
        match self {
            Mechanism::Jbd2(j) => j.holds_so_far(),
            Mechanism::Xfs(x) => x.holds_so_far(),
        }
    }

    pub fn take_violations(&mut self) -> Vec<JournalViolation> {
        match self {
            Mechanism::Jbd2(j) => j.take_violations(),
            Mechanism::Xfs(x) => x.take_violations(),
        }
    }

    pub fn protects(&self, line: u64) -> bool {
        match self {
            Mechanism::Jbd2(j) => j.protects(line),
            Mechanism::Xfs(x) => x.protects(line),
        }
    }
}
