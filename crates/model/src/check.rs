//! Checking a program's recovery on every crash image in process, and keeping one witness
//! of each kind of failure (the PM subjects' crash tests).

use std::fmt;
use std::mem::discriminant;

use persim_trace::Entry;

use crate::config::Config;
use crate::memory::for_each_crash_image;
use crate::origin::{Choice, FailurePoint};
use crate::replay::ModelError;

/// A crash image on which the check failed.
#[derive(Clone, Debug)]
pub struct Violation<P> {
    pub point: FailurePoint,
    pub choice: Choice,
    pub problem: P,
}

impl<P: fmt::Display> fmt::Display for Violation<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let FailurePoint {
            index,
            kind,
            checkpoint,
        } = self.point;
        write!(
            f,
            "{kind} failure point at entry {index} (checkpoint {checkpoint:?}), image {:?}: {}",
            self.choice, self.problem
        )
    }
}

/// What checking every crash image found.
#[derive(Debug)]
pub struct CheckReport<P> {
    pub points: usize,
    pub images: usize,
    /// Failure points whose image set exceeded the cap and was sampled.
    pub incomplete: usize,
    /// The first violation of each kind (enum variant) of problem, in trace order.
    pub witnesses: Vec<Violation<P>>,
    pub violation_count: usize,
}

/// Replays `entries` and runs `check(point, image)` on every crash image's contents.
pub fn check_crash_images<P>(
    config: Config,
    initial: Vec<u8>,
    entries: &[Entry],
    mut check: impl FnMut(FailurePoint, &[u8]) -> Result<(), P>,
) -> Result<CheckReport<P>, ModelError> {
    let mut witnesses: Vec<Violation<P>> = Vec::new();
    let mut violation_count = 0;
    let counts = for_each_crash_image(config, initial, entries, |point, image, choice| {
        if let Err(problem) = check(point, image) {
            violation_count += 1;
            let kind = discriminant(&problem);
            if witnesses.iter().all(|v| discriminant(&v.problem) != kind) {
                witnesses.push(Violation {
                    point,
                    choice: choice.clone(),
                    problem,
                });
            }
        }
    })?;
    Ok(CheckReport {
        points: counts.points,
        images: counts.images,
        incomplete: counts.incomplete,
        witnesses,
        violation_count,
    })
}
