//! What a restart may recover at a failure point.
//!
//! Operation k is bracketed by checkpoints 2k and 2k + 1: in flight from checkpoint 2k, done
//! from 2k + 1. At a failure point:
//! - the consumer's state is its last commit whose trace index is at or before the point;
//! - every acknowledged put of a later txg must be replayed, exactly once;
//! - a put in flight may be replayed; nothing else may (a put of a committed txg, or a
//!   stale entry of an earlier use of a chunk);
//! - replay follows the order of the puts (one thread writes, so generation and id order
//!   is program order);
//! - each chunk reads as one sequential log: positions rise along it;
//! - chunks freed by a finished `txg_synced` are free after the restart.

use std::collections::BTreeMap;
use std::fmt;

use persim_crash_check::Panicked;
use persim_model::FailurePoint;
use persim_zil_pmem::{OpenError, Position, ReplayStop};

use crate::run::{Done, Run};

/// The allowed outcomes at one failure point.
#[derive(Debug)]
pub struct Expected<'a> {
    /// The consumer's last committed txg.
    pub committed: u64,
    /// Puts that may be replayed: (op index, body), by position.
    may: BTreeMap<Position, (usize, &'a [u8])>,
    /// Acknowledged puts of uncommitted txgs.
    must: Vec<Position>,
    /// At least this many chunks must be free after the restart's claim.
    pub min_free: usize,
}

impl<'a> Expected<'a> {
    pub fn at(run: &'a Run, point: FailurePoint) -> Self {
        let (acknowledged, started) = match point.checkpoint {
            None => (0, 0),
            Some(c) => (c.div_ceil(2) as usize, c as usize / 2 + 1),
        };
        let committed = run
            .done
            .iter()
            .filter_map(|done| match *done {
                Done::Sync { txg, at } if at <= point.index => Some(txg),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let mut may = BTreeMap::new();
        let mut must = Vec::new();
        for (k, done) in run.done.iter().enumerate().take(started) {
            if let Done::Put {
                position,
                txg,
                body,
            } = done
            {
                if *txg > committed {
                    may.insert(*position, (k, &body[..]));
                    if k < acknowledged {
                        must.push(*position);
                    }
                }
            }
        }
        let in_flight_put =
            started > acknowledged && matches!(run.done.get(acknowledged), Some(Done::Put { .. }));
        let min_free = match acknowledged {
            0 => run.chunk_count,
            n => run.free_after[n - 1],
        }
        .saturating_sub(usize::from(in_flight_put));
        Expected {
            committed,
            may,
            must,
            min_free,
        }
    }

    /// Checks the replayed entries (position, body) in replay order.
    pub fn judge(&self, replayed: &[(Position, Vec<u8>)]) -> Result<(), Problem> {
        let mut last_op = None;
        for (position, body) in replayed {
            match self.may.get(position) {
                None => return Err(Problem::Stale(*position)),
                Some(&(_, appended)) if appended != &body[..] => {
                    return Err(Problem::WrongBody(*position))
                }
                Some(&(k, _)) => {
                    if last_op.is_some_and(|last| last >= k) {
                        return Err(Problem::Order(replayed.iter().map(|r| r.0).collect()));
                    }
                    last_op = Some(k);
                }
            }
        }
        let lost: Vec<Position> = self
            .must
            .iter()
            .filter(|p| !replayed.iter().any(|r| r.0 == **p))
            .copied()
            .collect();
        if lost.is_empty() {
            Ok(())
        } else {
            Err(Problem::Lost(lost))
        }
    }
}

/// A broken guarantee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    Open(OpenError),
    /// Claim or replay stopped (a missing dependency or a damaged body).
    Stopped(ReplayStop),
    /// A replayed entry that was never put, or of a committed txg.
    Stale(Position),
    WrongBody(Position),
    /// Replayed twice or out of the puts' order.
    Order(Vec<Position>),
    /// Acknowledged puts not replayed.
    Lost(Vec<Position>),
    /// A chunk whose positions do not rise: an entry of its earlier use follows a new one.
    MixedChunk {
        chunk: usize,
        positions: Vec<Position>,
    },
    /// Fewer free chunks than a finished `txg_synced` left.
    FreedChunkInUse {
        free: usize,
        expected: usize,
    },
    /// Appending after the recovery failed or changed what a second restart claims.
    Restart(String),
    Panicked,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Open(e) => write!(f, "open failed: {e}"),
            Problem::Stopped(e) => write!(f, "replay stopped: {e}"),
            Problem::Stale(p) => write!(f, "entry {p:?} is stale or was never put"),
            Problem::WrongBody(p) => write!(f, "entry {p:?} has a body that was not put"),
            Problem::Order(ps) => write!(f, "replayed out of order or twice: {ps:?}"),
            Problem::Lost(ps) => write!(f, "acknowledged puts lost: {ps:?}"),
            Problem::MixedChunk { chunk, positions } => {
                write!(f, "chunk {chunk} mixes uses: {positions:?}")
            }
            Problem::FreedChunkInUse { free, expected } => write!(
                f,
                "{free} free chunks after the restart, at least {expected} were freed"
            ),
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
