//! Two runs' recovered states compared as sets, interval by interval (`persim report DIR
//! --compare OTHER`): whether a narrower search of the same trace (another strategy or
//! `--scope`) finds every state a wider one finds.

use crate::CheckpointVerdict;
use persim_state::Recovered;
use serde::Serialize;
use std::collections::BTreeSet;

/// One interval's states in this run and in the other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IntervalStates {
    pub from: u64,
    pub to: u64,
    /// Distinct states of this run.
    pub here: usize,
    /// Distinct states of the other run.
    pub there: usize,
    /// This run's states (by their names here) that the other run does not have.
    pub only_here: Vec<String>,
    /// The other run's states (by their names there) that this run does not have.
    pub only_there: Vec<String>,
}

/// The states of both runs, per interval of either (matched by checkpoints).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatesComparison {
    pub intervals: Vec<IntervalStates>,
}

impl StatesComparison {
    /// Compares `here`'s intervals with `there`'s; `here_state` and `there_state` give an
    /// image's recovered state in each run. A state is the set of what its images
    /// recovered to (one, or a few that differ only in times recovery wrote), and two
    /// states are the same when those sets meet. An interval only one run has counts
    /// every state of it as that run's alone.
    pub fn new<'a, 'b, 'c>(
        here: &'c [CheckpointVerdict],
        there: &'c [CheckpointVerdict],
        here_state: impl Fn(&str) -> Option<&'a Recovered>,
        there_state: impl Fn(&str) -> Option<&'b Recovered>,
    ) -> StatesComparison {
        let checkpoints: BTreeSet<(u64, u64)> =
            (here.iter().chain(there)).map(|c| (c.from, c.to)).collect();
        let find = |run: &'c [CheckpointVerdict], (from, to): (u64, u64)| {
            run.iter().find(|c| (c.from, c.to) == (from, to))
        };
        let intervals = checkpoints
            .into_iter()
            .map(|interval| {
                let mine = states_of(find(here, interval), &here_state);
                let theirs = states_of(find(there, interval), &there_state);
                IntervalStates {
                    from: interval.0,
                    to: interval.1,
                    here: mine.len(),
                    there: theirs.len(),
                    only_here: missing_from(&mine, &theirs),
                    only_there: missing_from(&theirs, &mine),
                }
            })
            .collect();
        StatesComparison { intervals }
    }

    /// This run has every state the other run has.
    pub fn covers(&self) -> bool {
        self.intervals.iter().all(|i| i.only_there.is_empty())
    }

    /// The comparison for people: a line per interval, then the conclusion.
    pub fn to_text(&self) -> String {
        let mut out = String::from("states per interval: this run / the other run\n");
        for i in &self.intervals {
            out += &format!(
                "  checkpoint {} -> {}: {} / {}",
                i.from, i.to, i.here, i.there
            );
            for (side, names) in [("here", &i.only_here), ("there", &i.only_there)] {
                if !names.is_empty() {
                    out += &format!(", only {side}: {}", names.join(" "));
                }
            }
            out += "\n";
        }
        let missing: usize = self.intervals.iter().map(|i| i.only_there.len()).sum();
        let extra: usize = self.intervals.iter().map(|i| i.only_here.len()).sum();
        out += &match (missing, extra) {
            (0, 0) => "the same states in every interval\n".to_string(),
            (0, _) => format!(
                "this run has every state of the other, and {extra} more (a sampled or \
                 narrower other run)\n"
            ),
            _ => format!("this run lacks {missing} state(s) of the other run\n"),
        };
        out
    }
}

/// Each state of an interval: its name and what its images recovered to.
type States<'a> = Vec<(String, BTreeSet<&'a Recovered>)>;

fn states_of<'a>(
    interval: Option<&CheckpointVerdict>,
    state_of: &impl Fn(&str) -> Option<&'a Recovered>,
) -> States<'a> {
    let states = interval.map_or(&[][..], |c| &c.states);
    (states.iter())
        .map(|s| {
            let recovered = s.images.iter().filter_map(|h| state_of(h)).collect();
            (s.name.clone(), recovered)
        })
        .collect()
}

/// The names of `states` whose recoveries none of `others` has.
fn missing_from(states: &States, others: &States) -> Vec<String> {
    (states.iter())
        .filter(|(_, mine)| !others.iter().any(|(_, theirs)| !mine.is_disjoint(theirs)))
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StateInfo;
    use std::collections::HashMap;

    /// Interval 1 -> 2 with one state per list of images.
    fn interval(states: &[&[&str]]) -> Vec<CheckpointVerdict> {
        let states = (states.iter().enumerate())
            .map(|(k, images)| StateInfo {
                images: images.iter().map(|h| h.to_string()).collect(),
                ..StateInfo::recovered(&format!("c1s{k}"), vec![1], "")
            })
            .collect();
        vec![CheckpointVerdict::first_interval(states, Vec::new())]
    }

    /// Images a..e: a and b recover to the same state, the others each to their own.
    fn recoveries() -> HashMap<String, Recovered> {
        let state = |dump: &str| Recovered::State { dump: dump.into() };
        HashMap::from([
            ("a".into(), state("one")),
            ("b".into(), state("one")),
            ("c".into(), state("two")),
            (
                "d".into(),
                Recovered::RecoveryError {
                    output: "torn".into(),
                },
            ),
            ("e".into(), state("three")),
        ])
    }

    fn compare(here: &[&[&str]], there: &[&[&str]]) -> StatesComparison {
        let recovered = recoveries();
        StatesComparison::new(
            &interval(here),
            &interval(there),
            |h| recovered.get(h),
            |h| recovered.get(h),
        )
    }

    #[test]
    fn states_match_by_what_they_recovered_to_not_by_image_or_name() {
        // here: c1s0 = {one}, c1s1 = {torn}; there, in another order and from other images
        let same = compare(&[&["a"], &["d"]], &[&["d"], &["b"]]);
        assert!(same.covers());
        assert_eq!(same.intervals[0].here, 2);
        assert!(same.intervals[0].only_here.is_empty());
        assert!(same.to_text().contains("the same states in every interval"));
    }

    #[test]
    fn a_state_only_the_other_run_found_is_named_and_breaks_coverage() {
        let narrower = compare(&[&["a", "b"]], &[&["a"], &["c"], &["d"]]);
        assert!(!narrower.covers());
        assert_eq!(narrower.intervals[0].only_there, ["c1s1", "c1s2"]);
        let text = narrower.to_text();
        assert!(
            text.contains("checkpoint 1 -> 2: 1 / 3, only there: c1s1 c1s2"),
            "{text}"
        );
        assert!(text.contains("lacks 2 state(s)"), "{text}");
        // the other way round, this run has more: it covers a sample of itself
        let wider = compare(&[&["a"], &["c"], &["e"]], &[&["b"], &["c"]]);
        assert!(wider.covers());
        assert_eq!(wider.intervals[0].only_here, ["c1s2"]);
        assert!(wider.to_text().contains("and 1 more"));
    }

    #[test]
    fn an_interval_one_run_lacks_counts_all_its_states_as_missing() {
        let recovered = recoveries();
        let mut there = interval(&[&["a"]]);
        there[0].from = 2;
        there[0].to = 3;
        let c = StatesComparison::new(
            &interval(&[&["a"]]),
            &there,
            |h| recovered.get(h),
            |h| recovered.get(h),
        );
        assert_eq!(c.intervals.len(), 2);
        assert_eq!(c.intervals[1].only_there, ["c1s0"]);
        assert!(!c.covers());
    }
}
