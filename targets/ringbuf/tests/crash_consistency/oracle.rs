//! What recovery may and must return after a crash at a given failure point.
//!
//! The run has one thread, so appends are sequential: at a crash, every append before the
//! current one was acknowledged and the current one (if any) is in flight. The design then
//! guarantees that recovery returns every acknowledged entry, possibly the in-flight one
//! (whole, never partial), nothing released, and the ids in ascending order without gaps.
//! The exception is a release in flight: it zeroes the first header of each of its chunks,
//! so any subset of its chunks may already be gone. (With concurrent appends several
//! entries are in flight, and any subset of them may survive: the ids below the oldest
//! unacknowledged append are still all there. The model replays one CPU's program order,
//! so concurrent traces are not checked here.)

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use persim_crash_check::Panicked;
use persim_model::FailurePoint;
use persim_ringbuf::{CorruptEntry, OpenError};

use crate::run::Run;

/// What recovery returned for one crash image.
pub type Recovered = Vec<Result<(u64, Vec<u8>), CorruptEntry>>;

/// The allowed outcomes at one failure point.
#[derive(Debug)]
pub struct Expected<'a> {
    /// Acknowledged and not (even partly) released: must be recovered.
    must: BTreeSet<u64>,
    /// Started and not durably released, with their bodies: may be recovered.
    may: BTreeMap<u64, &'a [u8]>,
    /// Removed by a release whose fence has not taken effect yet.
    releasing: BTreeSet<u64>,
}

impl<'a> Expected<'a> {
    pub fn at(run: &'a Run, point: FailurePoint) -> Self {
        // Append k is bracketed by checkpoints 2k and 2k + 1: from checkpoint 2k on it is in
        // flight, from 2k + 1 on it is acknowledged.
        let (acknowledged, started) = match point.checkpoint {
            None => (0, 0),
            Some(c) => (c.div_ceil(2) as usize, c as usize / 2 + 1),
        };
        // A failure point at a fence lies before the fence takes effect, so a release is
        // durable only at failure points after its last entry (its fence).
        let gone: BTreeSet<u64> = run
            .releases
            .iter()
            .filter(|release| release.end <= point.index)
            .flat_map(|release| release.ids.iter().copied())
            .collect();
        let releasing: BTreeSet<u64> = run
            .releases
            .iter()
            .filter(|release| (release.start..release.end).contains(&point.index))
            .flat_map(|release| release.ids.iter().copied())
            .collect();
        let live = |&&(id, _): &&(u64, Vec<u8>)| !gone.contains(&id);
        Expected {
            must: run.appends[..acknowledged]
                .iter()
                .filter(live)
                .map(|(id, _)| *id)
                .filter(|id| !releasing.contains(id))
                .collect(),
            may: run.appends[..started.min(run.appends.len())]
                .iter()
                .filter(live)
                .map(|(id, body)| (*id, &body[..]))
                .collect(),
            releasing,
        }
    }

    /// Checks one recovery against the allowed outcomes.
    pub fn judge(&self, recovered: &Recovered) -> Result<(), Problem> {
        let mut ids = Vec::with_capacity(recovered.len());
        for item in recovered {
            let (id, body) = item.as_ref().map_err(|e| Problem::Damaged(e.clone()))?;
            match self.may.get(id) {
                None => return Err(Problem::Stale(*id)),
                Some(&appended) if appended != &body[..] => {
                    return Err(Problem::WrongBody(*id, body.len()))
                }
                Some(_) => ids.push(*id),
            }
        }
        if !ids.is_sorted_by(|a, b| a < b) {
            return Err(Problem::Order(ids));
        }
        let lost: Vec<u64> = self
            .must
            .iter()
            .filter(|id| ids.binary_search(id).is_err())
            .copied()
            .collect();
        if !lost.is_empty() {
            return Err(Problem::Lost(lost));
        }
        let kept: Vec<u64> = ids
            .into_iter()
            .filter(|id| !self.releasing.contains(id))
            .collect();
        if let Some(gap) = kept.windows(2).find(|w| w[1] != w[0] + 1) {
            return Err(Problem::Gap(gap[0], gap[1]));
        }
        Ok(())
    }
}

/// A broken guarantee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The crash image does not open.
    Open(OpenError),
    /// Recovery yielded a damaged entry.
    Damaged(CorruptEntry),
    /// An entry that was released, or never appended (id).
    Stale(u64),
    /// An entry whose body is not the appended one (id, body length).
    WrongBody(u64, usize),
    /// Ids out of order.
    Order(Vec<u64>),
    /// Acknowledged entries missing.
    Lost(Vec<u64>),
    /// Recovered ids with missing ones between them.
    Gap(u64, u64),
    /// An append after the restart failed or changed the entries already there.
    Restart(String),
    Panicked,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Open(e) => write!(f, "open failed: {e}"),
            Problem::Damaged(e) => write!(f, "damaged entry: {e}"),
            Problem::Stale(id) => write!(f, "entry {id} is stale or was never appended"),
            Problem::WrongBody(id, len) => {
                write!(
                    f,
                    "entry {id} has a {len}-byte body that is not the appended one"
                )
            }
            Problem::Order(ids) => write!(f, "ids not in ascending order: {ids:?}"),
            Problem::Lost(ids) => write!(f, "acknowledged entries lost: {ids:?}"),
            Problem::Gap(a, b) => write!(f, "gap between entries {a} and {b}"),
            Problem::Restart(what) => write!(f, "after the restart: {what}"),
            Problem::Panicked => write!(f, "recovery panicked"),
        }
    }
}

impl From<Panicked> for Problem {
    fn from(_: Panicked) -> Self {
        Problem::Panicked
    }
}
