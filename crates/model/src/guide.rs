//! Which dirty lines the recovery-guided `reads` strategy explores (the thesis' Suvi-Reads,
//! docs/model.md "Recovery-guided images"): the dirty lines that recovery of the fully
//! persisted image reads, plus the dirty lines the previous failure point's recovery read
//! and this one's does not (a shrinking read set: recovery may stop reading a line exactly
//! because a pending store is durable in the fully persisted image).

use crate::replay::FailureView;
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
    /// The split of `view`'s dirty lines, given the lines (ascending addresses) that the
    /// recovery of its fully persisted image read; `None` (not known, e.g. the recovery
    /// crashed the guest) explores every dirty line.
    pub fn split(&mut self, view: &FailureView<'_>, read: Option<&[u64]>) -> Explored {
        let mut out = Explored::default();
        for line in view.pending_lines().iter().map(|l| l.line) {
            let now = read.is_none_or(|r| r.binary_search(&line).is_ok());
            let before = read.is_some()
                && self
                    .previous
                    .as_ref()
                    .is_some_and(|p| p.binary_search(&line).is_ok());
            if now || before {
                out.explored.push(line);
            } else {
                out.skipped.push(line);
            }
            if before && !now {
                out.from_previous.push(line);
            }
        }
        if let Some(read) = read {
            self.previous = Some(read.to_vec());
        }
        out
    }
}
