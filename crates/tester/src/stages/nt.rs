//! The NT stage of `reads --nt-prefixes auto` (the thesis' Suvi-NT): after the states are
//! known, the failure points where some state arises only from images that apply NT
//! stores (`nt-prefixes.json`, decided once); there the images are made again with NT
//! prefixes, and their states recovered.

use super::{images, states, Run};
use crate::progress::Pass;
use anyhow::Result;
use persim_analyze::NtSummary;
use persim_image::{ImageStore, ImagesIndex, NtPrefixesAt};
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Decides (or reads back) where NT prefixes matter, and makes the images and states
/// there unless `images.json` already has them; `store` and `states` become the run's
/// with them.
pub(super) fn nt_prefixes(
    run: &mut Run,
    decided: Option<NtDecision>,
    store: &mut ImageStore,
    states: &mut BTreeMap<String, Recovered>,
) -> Result<NtSummary> {
    let dir = run.dir;
    let index = images::index(run)?;
    let generated = index
        .failure_points
        .iter()
        .any(|p| p.reads.as_ref().is_some_and(|r| r.nt_prefixes));
    let decision = match decided {
        Some(decision) => decision,
        None => {
            let decision = nt_dependent(index, states);
            write_atomically(&dir.nt_decision(), &serde_json::to_vec_pretty(&decision)?)?;
            decision
        }
    };
    if !decision.points.is_empty() && !generated {
        let nt_at = NtPrefixesAt::Points(Arc::new(decision.points.clone()));
        let guidance = images::guidance(run, &nt_at)?;
        images::generate(run, guidance, Pass::NtPrefixes)?;
        (*store, *states) = states::states(run, &nt_at)?;
    }
    let distinct: BTreeSet<&Recovered> = states.values().collect();
    Ok(NtSummary {
        dependent_states: decision.dependent_states,
        failure_points: decision.points.len(),
        new_states: distinct.len().saturating_sub(decision.states_before),
    })
}

/// `nt-prefixes.json`: where `--nt-prefixes auto` explores NT prefixes, decided once from
/// the states of the images without them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NtDecision {
    /// Distinct states before the NT-prefix images.
    pub states_before: usize,
    /// Distinct states that, at some failure point, only images applying NT stores gave.
    pub dependent_states: usize,
    /// Those failure points (trace indices).
    pub points: BTreeSet<u64>,
}

/// The NT-dependent failure points of a `reads` run (the thesis' Suvi-NT): those where
/// every image that gives some state applies pending NT stores, so the state may hinge
/// on NT stores that, taken all or nothing, were never split.
fn nt_dependent(index: &ImagesIndex, states: &BTreeMap<String, Recovered>) -> NtDecision {
    let mut points = BTreeSet::new();
    let mut dependent = BTreeSet::new();
    for point in &index.failure_points {
        let Some(reads) = point.reads.as_ref().filter(|r| !r.nt_prefixes) else {
            continue;
        };
        // per state: whether all of its images here apply NT stores
        let mut only_nt: BTreeMap<&Recovered, bool> = BTreeMap::new();
        for hash in &point.images {
            if let Some(state) = states.get(hash) {
                let nt = reads.nt_images.contains(hash);
                *only_nt.entry(state).or_insert(true) &= nt;
            }
        }
        for (state, only) in only_nt {
            if only {
                points.insert(point.index);
                dependent.insert(state);
            }
        }
    }
    NtDecision {
        states_before: states.values().collect::<BTreeSet<_>>().len(),
        dependent_states: dependent.len(),
        points,
    }
}
