//! Each mutant build breaks one step of the engine; the checks must catch it, with the
//! violation docs/design/zil-pmem.md describes, wherever the model allows it to show.

use persim_crash_check::{styles, CACHES};
use persim_model::{CacheMode, Strategy};
use persim_ringbuf::TraceStyle;

use crate::checker::{check, Report};
use crate::oracle::Problem;
use crate::run::record;
use crate::scenarios::fill_sync_reuse;
use crate::STRATEGIES;

const MAX_IMAGES: usize = 4096;

/// One replay of the scenario with what it found.
struct Finding {
    style: TraceStyle,
    cache: CacheMode,
    strategy: Strategy,
    report: Report,
}

impl Finding {
    fn name(&self) -> String {
        format!("{:?}, {} caches, {}", self.style, self.cache, self.strategy)
    }

    /// Whether some witness shows `problem`.
    fn finds(&self, problem: impl Fn(&Problem) -> bool) -> bool {
        self.report.witnesses.iter().any(|w| problem(&w.problem))
    }
}

/// Replays the fill/sync/reuse run in every style, cache mode and strategy, and prints
/// the first witness of each kind.
fn survey() -> Vec<Finding> {
    let (shape, steps) = fill_sync_reuse();
    let mut findings = Vec::new();
    for cache in CACHES {
        for &style in styles(cache) {
            let run = record(style, shape, &steps);
            for strategy in STRATEGIES {
                let report = check(&run, cache, strategy, MAX_IMAGES);
                let finding = Finding {
                    style,
                    cache,
                    strategy,
                    report,
                };
                eprintln!(
                    "{}: {} of {} images violate",
                    finding.name(),
                    finding.report.violation_count,
                    finding.report.images
                );
                for witness in &finding.report.witnesses {
                    eprintln!("    {witness}");
                }
                findings.push(finding);
            }
        }
    }
    findings
}

#[cfg(feature = "mutant-no-drain-between-body-and-header")]
#[test]
fn without_the_drain_a_header_persists_over_a_missing_body() {
    for finding in survey() {
        // Lines persist independently with volatile caches, and NT stores bypass the
        // (persistent) cache; cached stores on persistent caches drain in program order, so
        // the header cannot overtake its body there.
        let reorders =
            finding.cache == CacheMode::Volatile || finding.style == TraceStyle::NonTemporal;
        let torn = |p: &Problem| {
            matches!(
                p,
                Problem::Stopped(persim_zil_pmem::ReplayStop::BodyChecksum { .. })
            )
        };
        if reorders {
            assert!(
                finding.finds(torn),
                "{}: a header over a missing body",
                finding.name()
            );
        } else {
            assert_eq!(finding.report.violation_count, 0, "{}", finding.name());
        }
    }
}

#[cfg(feature = "mutant-no-zero-next-header")]
#[test]
fn without_zeroing_the_next_header_a_reused_chunk_reads_an_old_entry() {
    for finding in survey() {
        // The stale header of the chunk's earlier use is durable long before the reuse:
        // every model shows it after the new entry.
        assert!(
            finding.finds(|p| matches!(p, Problem::MixedChunk { .. })),
            "{}: an entry of the chunk's earlier use after a new one",
            finding.name()
        );
    }
}

#[cfg(feature = "mutant-no-zero-freed-chunk")]
#[test]
fn without_zeroing_a_freed_chunk_it_comes_back_in_use_after_a_crash() {
    for finding in survey() {
        assert!(
            finding.finds(|p| matches!(p, Problem::FreedChunkInUse { .. })),
            "{}: a freed chunk with its old first header",
            finding.name()
        );
    }
}

#[cfg(feature = "mutant-no-body-checksum")]
#[test]
fn without_the_body_checksum_a_flipped_bit_reaches_the_consumer() {
    // The write path is intact: crashes alone do not show this mutant.
    for finding in survey() {
        assert!(!finding.finds(|_| true), "{}", finding.name());
    }
    let (applied, stop) = crate::flipped_bit::replay_with_a_flipped_bit();
    assert_eq!(stop, None);
    assert_eq!(applied.len(), 3);
    assert_ne!(
        applied[1],
        persim_crash_check::body(1, 500),
        "the damaged body was applied"
    );
}
