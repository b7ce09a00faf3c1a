//! Verdicts per checkpoint interval (ARCHITECTURE.md): the states a crash can leave between
//! checkpoint N and N+1, the final states (at the first failure point of N+1), *single
//! final state*, *atomic*, and whether the test's invariants hold in every state.

use crate::{FinalCheck, Invariant};
use persim_model::{Choice, FailurePoint, Origin};
use persim_state::{Outcome, Recovered};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One distinct state of an interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateInfo {
    /// `c<N>s<K>`: the K-th state discovered in interval N.
    pub name: String,
    pub outcome: Outcome,
    /// Every image behind this state in the interval is a partial one (neither nothing nor
    /// everything pending): only reordering or torn writes lead here.
    pub partial_only: bool,
    /// Trace indices of the failure points where the state arises.
    pub failure_points: Vec<u64>,
    /// Hashes of the crash images behind it.
    pub images: Vec<String>,
    /// `reads`: which dirty lines were explored at its first failure point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<StateLines>,
    /// With a disk: the media whose pending writes its images leave out, against the
    /// fully persisted image of their failure point, one entry per way (fewest media
    /// first, `[pm, disk]`: either alone). Empty when a fully persisted image gives the
    /// state, or no image of the run had pending disk writes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<Media>,
    /// Some of its images recovered to it but for timestamps that recovery wrote (it
    /// finished an operation with its own clock); those count as this state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub times_set_by_recovery: bool,
}

#[cfg(test)]
impl StateInfo {
    /// A state recovered from one image, for the tests of the crate.
    pub(crate) fn recovered(name: &str, failure_points: Vec<u64>, image: &str) -> StateInfo {
        StateInfo {
            name: name.into(),
            outcome: Outcome::State,
            partial_only: false,
            failure_points,
            images: vec![image.into()],
            lines: None,
            media: Vec::new(),
            times_set_by_recovery: false,
        }
    }
}

#[cfg(test)]
impl CheckpointVerdict {
    /// Interval 1 → 2 with these states, atomic, for the tests of the crate.
    pub(crate) fn first_interval(states: Vec<StateInfo>, final_states: Vec<String>) -> Self {
        CheckpointVerdict {
            from: 1,
            to: 2,
            states,
            final_states,
            single_final_state: true,
            atomic: true,
            errors: Vec::new(),
            culprits: Vec::new(),
            invariant: None,
            reference: None,
            expected: None,
        }
    }
}

/// What a crash image leaves out of the pending writes at its failure point: PM stores,
/// disk writes (a block keeping its durable content or an earlier pending write), or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Media {
    Pm,
    Disk,
    PmAndDisk,
}

impl Media {
    /// `from PM`, `from the disk`, `from PM and the disk`, `from PM or the disk`; None for
    /// no way.
    pub fn describe(ways: &[Media]) -> Option<String> {
        let names: Vec<&str> = ways
            .iter()
            .map(|m| match m {
                Media::Pm => "PM",
                Media::Disk => "the disk",
                Media::PmAndDisk => "PM and the disk",
            })
            .collect();
        (!names.is_empty()).then(|| format!("from {}", names.join(" or ")))
    }

    /// What `origin` leaves out; `pm_pending`: whether PM had pending stores at its
    /// failure point (its choice is `nothing` either way when it had none).
    fn left_out(origin: &Origin, pm_pending: bool) -> Option<Media> {
        let pm = pm_pending && origin.choice != Choice::Everything;
        let disk = origin
            .block
            .as_ref()
            .is_some_and(|b| *b != Choice::Everything);
        match (pm, disk) {
            (false, false) => None,
            (true, false) => Some(Media::Pm),
            (false, true) => Some(Media::Disk),
            (true, true) => Some(Media::PmAndDisk),
        }
    }

    /// The ways a state's images leave writes out (`None`: one leaves nothing out), as
    /// `StateInfo::media` lists them: a way that needs both media is dropped when one
    /// medium alone is a way.
    fn ways(seen: &BTreeSet<Option<Media>>) -> Vec<Media> {
        if seen.contains(&None) {
            return Vec::new();
        }
        let alone = seen.contains(&Some(Media::Pm)) || seen.contains(&Some(Media::Disk));
        seen.iter()
            .flatten()
            .filter(|&&m| !(alone && m == Media::PmAndDisk))
            .copied()
            .collect()
    }
}

/// The dirty lines at a state's first failure point that `reads` explored (recovery
/// reads them) and skipped (they follow the cut).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateLines {
    pub point: u64,
    pub explored: Vec<u64>,
    pub skipped: Vec<u64>,
}

/// A state whose recovery failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub state: String,
    pub outcome: Outcome,
    pub output: String,
}

/// The verdict of interval `from` → `to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointVerdict {
    pub from: u64,
    pub to: u64,
    pub states: Vec<StateInfo>,
    /// Names of the states at the first failure point of checkpoint `to`.
    pub final_states: Vec<String>,
    pub single_final_state: bool,
    /// Single final state, at most two states in the interval and no failed recovery.
    pub atomic: bool,
    pub errors: Vec<ErrorInfo>,
    /// The code behind the violation (`find_culprits`), when the trace was at hand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub culprits: Vec<crate::Culprit>,
    /// With invariants in the test: whether they hold in every state of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invariant: Option<InvariantVerdict>,
    /// With a reference configuration: the final states against its state at `to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<FinalCheck>,
    /// With the test's `expect` for this interval: the final states against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<FinalCheck>,
}

/// The test's invariants over the states of one interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvariantVerdict {
    /// No state that recovered to JSON breaks one.
    pub holds: bool,
    pub broken: Vec<BrokenInvariant>,
}

/// A state that breaks an invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokenInvariant {
    pub state: String,
    pub invariant: String,
    /// The values it saw: `/sum is 70`.
    pub why: String,
}

impl CheckpointVerdict {
    /// A failed recovery, several final states, a final state other than the reference's
    /// or the expected one, or, without invariants, more than two states. Invariants say
    /// which states between the two ends are allowed, so with them a broken invariant
    /// takes the place of the limit of two states.
    pub fn violated(&self) -> bool {
        self.final_state_differs() || self.states_violated()
    }

    /// Some final state differs from the reference's or from the expected one.
    pub fn final_state_differs(&self) -> bool {
        [&self.reference, &self.expected]
            .into_iter()
            .flatten()
            .any(|check| !check.matches())
    }

    /// The verdict of the states alone, not of what they should be.
    pub fn states_violated(&self) -> bool {
        match &self.invariant {
            Some(invariant) => {
                !invariant.holds || !self.single_final_state || !self.errors.is_empty()
            }
            None => !self.atomic,
        }
    }
}

/// One image of a failure point: its rank there ("nothing" 0, partial 1, "everything" 2),
/// hash and origin.
type PointImage<'a> = (u8, &'a str, &'a Origin);

/// An image's hash and every origin recorded for it (the image store's index).
pub struct ImageOrigins<'a> {
    pub hash: &'a str,
    pub origins: &'a [Origin],
}

/// Computes the verdict of every interval N → N+1 for which the trace has checkpoint N+1.
/// `state_of` gives the recovered state of an image; images without one are reported as
/// errors of their interval. `invariants` (the test's, maybe none) are checked in every
/// state.
pub fn verdicts<'a>(
    images: impl IntoIterator<Item = ImageOrigins<'a>>,
    state_of: impl Fn(&str) -> Option<&'a Recovered>,
    invariants: &[Invariant],
) -> Vec<CheckpointVerdict> {
    // failure point -> its images, "nothing" first and "everything" last (discovery order)
    let mut points: BTreeMap<FailurePoint, Vec<PointImage>> = BTreeMap::new();
    let mut disk = false;
    for image in images {
        for origin in image.origins {
            let rank = match origin.choice {
                Choice::Nothing => 0,
                Choice::Everything => 2,
                _ => 1,
            };
            disk |= origin.block.is_some();
            points
                .entry(origin.point)
                .or_default()
                .push((rank, image.hash, origin));
        }
    }
    for list in points.values_mut() {
        list.sort_by_key(|&(rank, hash, origin)| (rank, hash, is_partial(origin)));
    }
    let first_of = |checkpoint: u64| points.keys().find(|p| p.checkpoint == Some(checkpoint));
    let mut checkpoints: Vec<u64> = points.keys().filter_map(|p| p.checkpoint).collect();
    checkpoints.dedup();
    let mut out = Vec::new();
    for &from in &checkpoints {
        let Some(final_point) = first_of(from + 1) else {
            continue;
        };
        let in_interval = points
            .iter()
            .filter(|(p, _)| p.checkpoint == Some(from))
            .chain(std::iter::once((final_point, &points[final_point])));
        let mut interval = Interval::new(from);
        let in_interval: Vec<_> = in_interval.collect();
        let stand_in = recovery_time_stand_ins(&in_interval, final_point, &state_of);
        for (point, list) in in_interval {
            // Every strategy keeps "everything" among a point's images when PM has pending
            // stores, and labels the one image of a point without any "nothing".
            let pm_pending = list.iter().any(|(_, _, o)| o.choice != Choice::Nothing);
            for &(_, hash, origin) in list {
                let left_out = Media::left_out(origin, pm_pending);
                let recovered = state_of(hash);
                let counted = recovered.map(|r| stand_in.get(r).copied().unwrap_or(r));
                interval.add(point.index, hash, origin, left_out, counted);
                if counted != recovered {
                    let at = interval.by_state[&counted];
                    interval.states[at].times_set_by_recovery = true;
                }
            }
        }
        if disk {
            for (state, seen) in interval.states.iter_mut().zip(&interval.left_out) {
                state.media = Media::ways(seen);
            }
        }
        let final_states = interval.names_at(final_point.index);
        let single_final_state = final_states.len() == 1;
        let atomic = single_final_state && interval.states.len() <= 2 && interval.errors.is_empty();
        let invariant = (!invariants.is_empty())
            .then(|| check_invariants(invariants, &interval.states, &state_of));
        out.push(CheckpointVerdict {
            from,
            to: from + 1,
            states: interval.states,
            final_states,
            single_final_state,
            atomic,
            errors: interval.errors,
            culprits: Vec::new(),
            invariant,
            reference: None,
            expected: None,
        });
    }
    out
}

/// The interval's states that are another of its states but for timestamps recovery wrote
/// (`Recovered::is_but_for_recovery_times`), each with the state it counts as: a final
/// state where one matches, else the first that does. Recovery that finishes an operation
/// stamps it with its own clock, which is no state a crash leaves of its own.
fn recovery_time_stand_ins<'a>(
    in_interval: &[(&FailurePoint, &Vec<PointImage>)],
    final_point: &FailurePoint,
    state_of: &impl Fn(&str) -> Option<&'a Recovered>,
) -> HashMap<&'a Recovered, &'a Recovered> {
    let mut distinct: Vec<(&'a Recovered, bool)> = Vec::new();
    for (point, list) in in_interval {
        for (_, hash, _) in list.iter() {
            let Some(recovered) = state_of(hash) else {
                continue;
            };
            let at_end = *point == final_point;
            match distinct.iter_mut().find(|(r, _)| *r == recovered) {
                Some((_, is_final)) => *is_final |= at_end,
                None => distinct.push((recovered, at_end)),
            }
        }
    }
    let candidates = || {
        let finals = distinct.iter().filter(|(_, f)| *f);
        finals.chain(distinct.iter().filter(|(_, f)| !*f))
    };
    let direct: HashMap<&'a Recovered, &'a Recovered> = distinct
        .iter()
        .filter_map(|&(stamped, _)| {
            let (other, _) =
                candidates().find(|(other, _)| stamped.is_but_for_recovery_times(other))?;
            Some((stamped, *other))
        })
        .collect();
    // A state stamped in more fields may stand in for one stamped in fewer: follow to the
    // end (a stand-in is never stamped in more fields than its state, so there is no cycle).
    (direct.keys())
        .map(|&stamped| {
            let mut to = direct[stamped];
            while let Some(&next) = direct.get(to) {
                to = next;
            }
            (stamped, to)
        })
        .collect()
}

/// `invariants` in each of `states` that recovered to JSON: a failed recovery is an error
/// of the interval already, and a state that is not JSON has no fields to check.
fn check_invariants<'a>(
    invariants: &[Invariant],
    states: &[StateInfo],
    state_of: impl Fn(&str) -> Option<&'a Recovered>,
) -> InvariantVerdict {
    let mut broken = Vec::new();
    for state in states {
        let Some(Recovered::State { dump }) = state.images.first().and_then(|h| state_of(h)) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(dump) else {
            continue;
        };
        for invariant in invariants {
            if let Err(why) = invariant.check(&json) {
                broken.push(BrokenInvariant {
                    state: state.name.clone(),
                    invariant: invariant.to_string(),
                    why,
                });
            }
        }
    }
    InvariantVerdict {
        holds: broken.is_empty(),
        broken,
    }
}

fn is_partial(origin: &Origin) -> bool {
    let whole = |c: &Choice| matches!(c, Choice::Nothing | Choice::Everything);
    !whole(&origin.choice) || origin.block.as_ref().is_some_and(|b| !whole(b))
}

/// The states of one interval as they are discovered.
struct Interval<'a> {
    checkpoint: u64,
    states: Vec<StateInfo>,
    /// Per state, what each of its images' origins leaves out.
    left_out: Vec<BTreeSet<Option<Media>>>,
    errors: Vec<ErrorInfo>,
    by_state: HashMap<Option<&'a Recovered>, usize>,
}

impl<'a> Interval<'a> {
    fn new(checkpoint: u64) -> Self {
        Interval {
            checkpoint,
            states: Vec::new(),
            left_out: Vec::new(),
            errors: Vec::new(),
            by_state: HashMap::new(),
        }
    }

    fn add(
        &mut self,
        point: u64,
        hash: &str,
        origin: &Origin,
        left_out: Option<Media>,
        recovered: Option<&'a Recovered>,
    ) {
        let next = self.states.len();
        let i = *self.by_state.entry(recovered).or_insert(next);
        if i == next {
            let name = format!("c{}s{}", self.checkpoint, i);
            let outcome = recovered.map_or(Outcome::NotExtracted, Recovered::outcome);
            if recovered.is_none_or(Recovered::is_error) {
                self.errors.push(ErrorInfo {
                    state: name.clone(),
                    outcome,
                    output: recovered
                        .map_or("no state was extracted for this image", |r| r.text())
                        .to_string(),
                });
            }
            self.states.push(StateInfo {
                name,
                outcome,
                partial_only: true,
                failure_points: Vec::new(),
                images: Vec::new(),
                lines: None,
                media: Vec::new(),
                times_set_by_recovery: false,
            });
            self.left_out.push(BTreeSet::new());
        }
        self.left_out[i].insert(left_out);
        let state = &mut self.states[i];
        state.partial_only &= is_partial(origin);
        if state.failure_points.last() != Some(&point) {
            state.failure_points.push(point);
        }
        if !state.images.iter().any(|h| h == hash) {
            state.images.push(hash.to_string());
        }
    }

    fn names_at(&self, point: u64) -> Vec<String> {
        self.states
            .iter()
            .filter(|s| s.failure_points.contains(&point))
            .map(|s| s.name.clone())
            .collect()
    }
}
