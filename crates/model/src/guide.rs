//! Which dirty lines the recovery-guided `reads` strategy explores (the thesis' Suvi-Reads,
//! docs/design/model.md "Recovery-guided images"): the dirty lines with a pending unit in a word
//! that recovery of the fully persisted image reads, plus those whose pending words the
//! previous failure point's recovery read and this one's does not (a shrinking read set:
//! recovery may stop reading a line exactly because a pending store is durable in the fully
//! persisted image). Words, not lines: a line's pending units matter only if recovery reads
//! them, not its other bytes (a library's run-time fields beside persistent ones).

use crate::pending::LineState;
use crate::replay::FailureView;
use crate::unit::WORD;
use serde::{Deserialize, Serialize};

/// The dirty lines of one failure point, split by the guide.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explored {
    /// Line addresses whose pending units are explored, ascending.
    pub explored: Vec<u64>,
    /// Dirty lines left to follow the cut, ascending.
    pub skipped: Vec<u64>,
    /// Of `explored`, the lines only the previous failure point's recovery read.
    pub from_previous: Vec<u64>,
}

impl Explored {
    pub fn explores(&self, line: u64) -> bool {
        self.explored.binary_search(&line).is_ok()
    }
}

/// Carries the previous failure point's read set from one failure point to the next.
#[derive(Debug, Default)]
pub struct ReadGuide {
    previous: Option<Vec<u64>>,
}

impl ReadGuide {
    /// The split of `view`'s dirty lines, given the words (ascending addresses of aligned
    /// 8-byte words) that the recovery of its fully persisted image read of it; `None`
    /// (not known, e.g. the recovery crashed the guest) explores every dirty line.
    pub fn split(&mut self, view: &FailureView<'_>, read: Option<&[u64]>) -> Explored {
        let mut out = Explored::default();
        let runtime: Vec<u64> = view.runtime_lines().collect();
        let outside: Vec<u64> = view.outside_program_lines().collect();
        let protected: Vec<u64> = view.protected_lines().collect();
        for line in view.pending_lines() {
            let found = |lines: &[u64]| lines.binary_search(&line.line).is_ok();
            if found(&runtime) || found(&outside) || found(&protected) {
                // Run-time data the program declared, not the program's PM, or protected
                // by a journal: never explored.
                out.skipped.push(line.line);
                continue;
            }
            let now = read.is_none_or(|r| reads_pending(line, r));
            let before = read.is_some()
                && self
                    .previous
                    .as_ref()
                    .is_some_and(|p| reads_pending(line, p));
            if now || before {
                out.explored.push(line.line);
            } else {
                out.skipped.push(line.line);
            }
            if before && !now {
                out.from_previous.push(line.line);
            }
        }
        self.learn(read);
        out
    }

    /// Takes the read set of a failure point whose split is not needed (its images are
    /// not made), for the next point's split.
    pub fn learn(&mut self, read: Option<&[u64]>) {
        if let Some(read) = read {
            self.previous = Some(read.to_vec());
        }
    }
}

/// Whether `words` (ascending) holds a word that a pending unit of `line` writes.
fn reads_pending(line: &LineState, words: &[u64]) -> bool {
    line.units()
        .iter()
        .any(|u| words.binary_search(&(u.addr & !(WORD - 1))).is_ok())
}
