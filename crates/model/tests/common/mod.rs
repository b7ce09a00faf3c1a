//! Replaying a hand-made trace through a mechanism (jbd2, the XFS log, DPWC, dm-writecache,
//! ZIL-PMEM, libpmemobj's logs) and keeping what each failure point saw.

// each test crate uses some of these helpers
#![allow(dead_code)]

use persim_model::{
    Config, FailureKind, FailureView, JournalViolation, LogKind, Replay, Scope, Sink, Strategy,
};
use persim_trace::Entry;
use std::io;

/// Per failure point: its kind, the protected lines, the rules broken, the images; and
/// the mechanism of every rule broken; the violations themselves.
#[derive(Default)]
pub struct Seen(
    pub Vec<(FailureKind, Vec<u64>, Vec<u8>, usize)>,
    pub Vec<LogKind>,
    pub Vec<JournalViolation>,
);

impl Seen {
    /// The rules broken, failure point after failure point.
    pub fn rules(&self) -> Vec<u8> {
        self.0.iter().flat_map(|p| p.2.clone()).collect()
    }

    /// The kinds of the failure points, in order.
    pub fn kinds(&self) -> Vec<FailureKind> {
        self.0.iter().map(|p| p.0).collect()
    }

    /// Asserts what a correct two-fence commit gives (its lines, a fence, its commit, a
    /// fence): no rule broken, `lines` following the cut at the first fence and none at the
    /// second (the commit is explored), and fewer images there than `all`.
    pub fn commits_with_protected(&self, all: &Seen, lines: &[u64]) {
        use FailureKind::{Checkpoint, Fence};
        assert_eq!(self.kinds(), [Fence, Fence, Checkpoint]);
        assert!(self.rules().is_empty(), "no rule broken");
        assert_eq!(self.0[0].1, lines);
        assert!(self.0[1].1.is_empty());
        self.prunes_against(all, 0);
    }

    /// Asserts that `all` (the same trace under `Scope::All`) protects nothing and makes
    /// more images than this replay at failure point `point`.
    pub fn prunes_against(&self, all: &Seen, point: usize) {
        assert!(all.0.iter().all(|p| p.1.is_empty()));
        let (pruned, explored) = (self.0[point].3, all.0[point].3);
        assert!(
            pruned < explored,
            "fewer images: {pruned} against {explored}"
        );
    }
}

impl Sink for Seen {
    fn persist(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        let rules = view.journal_violations.iter().map(|v| v.rule).collect();
        self.1.extend(view.journal_violations.iter().map(|v| v.log));
        self.2.extend(view.journal_violations.iter().cloned());
        let images = view.crash_images().images.len();
        let protected = view.protected_lines().collect();
        self.0.push((view.point.kind, protected, rules, images));
        Ok(())
    }
}

/// Replays `body` and a closing checkpoint 2 with `global-prefix` on `pm_size` bytes of
/// PM, the configuration set up by `configure` (the scope, the mechanism's layout).
fn replay(body: &str, pm_size: u64, configure: impl FnOnce(&mut Config)) -> Seen {
    let text = format!("# persim-trace pm-size={pm_size:#x}\n{body}hypercall checkpoint 2\n");
    let entries: Vec<Entry> = persim_trace::Reader::new(io::Cursor::new(text))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut config = Config::new(pm_size);
    config.strategy = Strategy::GlobalPrefix;
    configure(&mut config);
    let mut replay = Replay::new(config);
    let mut seen = Seen::default();
    for entry in &entries {
        replay.step(entry, &mut seen).unwrap();
    }
    seen
}

/// `replay` under `scope` with one mechanism set up by `configure`; every rule broken must
/// be that mechanism's (`log`).
pub fn replay_logged(
    body: &str,
    pm_size: u64,
    scope: Scope,
    log: LogKind,
    configure: impl FnOnce(&mut Config),
) -> Seen {
    let seen = replay(body, pm_size, |config| {
        config.scope = scope;
        configure(config);
    });
    assert!(
        seen.1.iter().all(|broken| *broken == log),
        "only {log:?} rules broken: {:?}",
        seen.1
    );
    seen
}
