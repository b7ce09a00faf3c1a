//! Each mutant build breaks one step of the write path; the crash checks must catch it,
//! with the violation docs/design/ringbuf.md describes, wherever the model allows it to show.

use persim_crash_check::{styles, CACHES};
use persim_model::{CacheMode, FailurePoint, Strategy};
use persim_ringbuf::TraceStyle;

use crate::checker::{check, Report};
use crate::oracle::Problem;
use crate::run::record;
use crate::scenarios::fill_release_reuse;
use crate::STRATEGIES;

const MAX_IMAGES: usize = 4096;

/// One replay of the scenario with what it found.
struct Finding {
    style: TraceStyle,
    cache: CacheMode,
    strategy: Strategy,
    report: Report,
}

/// Replays the fill/release/reuse run in every style, cache mode and strategy, and prints
/// the first witness of each.
fn survey() -> Vec<Finding> {
    let (shape, steps) = fill_release_reuse();
    let mut findings = Vec::new();
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record::<64>(style, shape, &steps);
            for strategy in STRATEGIES {
                let report = check::<64>(&run, cache, strategy, MAX_IMAGES);
                eprintln!(
                    "{style:?}, {cache} caches, {strategy}: {} of {} images violate",
                    report.violation_count, report.images
                );
                for witness in &report.witnesses {
                    eprintln!("    {witness}");
                }
                findings.push(Finding {
                    style,
                    cache,
                    strategy,
                    report,
                });
            }
        }
    }
    findings
}

/// Whether the first violation of some kind matches `problem` and lies at a failure point
/// matching `point`.
fn finds(
    finding: &Finding,
    point: impl Fn(&FailurePoint) -> bool,
    problem: impl Fn(&Problem) -> bool,
) -> bool {
    finding
        .report
        .witnesses
        .iter()
        .any(|witness| point(&witness.point) && problem(&witness.problem))
}

fn name(finding: &Finding) -> String {
    format!(
        "{:?}, {} caches, {}",
        finding.style, finding.cache, finding.strategy
    )
}

/// The append in flight: between checkpoints 2k and 2k + 1.
fn inside_an_append(point: &FailurePoint) -> bool {
    point.checkpoint.is_some_and(|c| c % 2 == 0)
}

#[cfg(feature = "mutant-no-first-fence")]
#[test]
fn without_the_first_fence_a_header_persists_over_a_missing_body() {
    for finding in survey() {
        // Lines persist independently with volatile caches, and NT stores bypass the
        // (persistent) cache; cached stores on persistent caches drain in program order, so
        // the header cannot overtake its body there.
        let reorders =
            finding.cache == CacheMode::Volatile || finding.style == TraceStyle::NonTemporal;
        if reorders && finding.strategy != Strategy::ProgramOrder {
            let torn = |p: &Problem| {
                matches!(
                    p,
                    Problem::Damaged(persim_ringbuf::CorruptEntry::BodyChecksum { .. })
                )
            };
            assert!(
                finds(
                    &finding,
                    |p| p.kind == persim_model::FailureKind::Fence && inside_an_append(p),
                    torn
                ),
                "{}: a valid header over a body that did not persist",
                name(&finding)
            );
            // The header may also persist before the zeroed next header, exposing an entry
            // of the reused chunk's previous use.
            assert!(
                finds(&finding, inside_an_append, |p| matches!(
                    p,
                    Problem::Stale(_)
                )),
                "{}: a stale entry after the new one",
                name(&finding)
            );
        } else {
            // Program order has only "nothing" and "everything" at each fence: no reordering.
            assert_eq!(finding.report.violation_count, 0, "{}", name(&finding));
        }
    }
}

#[cfg(feature = "mutant-no-second-fence")]
#[test]
fn without_the_second_fence_an_acknowledged_append_is_lost() {
    for finding in survey() {
        // At the checkpoint after the append, its header is still pending (in the store
        // buffer, a write-combining buffer, or a cache line not yet written back).
        let after_an_append = |p: &FailurePoint| {
            p.kind == persim_model::FailureKind::Checkpoint && !inside_an_append(p)
        };
        assert!(
            finds(&finding, after_an_append, |p| matches!(p, Problem::Lost(_))),
            "{}: the last acknowledged entry can be lost",
            name(&finding)
        );
    }
}

#[cfg(feature = "mutant-no-zero-next-header")]
#[test]
fn without_zeroing_the_next_header_entries_of_a_reused_chunk_come_back() {
    for finding in survey() {
        // Every strategy includes the state with everything pending persisted, in which the
        // released entries already reappear; no crash is needed.
        assert!(
            finds(&finding, |_| true, |p| matches!(p, Problem::Stale(_))),
            "{}: a released entry comes back",
            name(&finding)
        );
        // An append over a stale entry writes the body first: in between, the stale header
        // is valid over a half-new body.
        let torn = |p: &Problem| {
            matches!(
                p,
                Problem::Damaged(persim_ringbuf::CorruptEntry::BodyChecksum { .. })
            )
        };
        assert!(
            finds(&finding, inside_an_append, torn),
            "{}: a stale header over a half-written body",
            name(&finding)
        );
    }
}
