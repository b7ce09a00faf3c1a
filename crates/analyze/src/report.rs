//! The report of one test run: `report.json` for programs, `report.txt` for people.

use crate::verdict::CheckpointVerdict;
use persim_model::{CacheMode, Strategy};
use persim_state::Outcome;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// `report.json` (the CLI contract of `persim run`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub test: String,
    pub fs: String,
    pub cache: CacheMode,
    pub strategy: Strategy,
    pub checkpoints: Vec<CheckpointVerdict>,
    /// `reads` with NT prefixes found where they matter (`--nt-prefixes auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nt_prefixes: Option<NtSummary>,
    /// Dirty lines the program declared run-time data (`hypercall volatile`), which
    /// `global-prefix` and `reads` did not explore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_data: Option<RuntimeSummary>,
    /// Under the `program` scope, the kernel's dirty lines outside the PM the program
    /// accessed, which `global-prefix` and `reads` did not explore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_program: Option<RuntimeSummary>,
    /// Under the `program` scope, the dirty lines a jbd2 journal whose ordering rules held
    /// protects, which `global-prefix` and `reads` did not explore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_protected: Option<RuntimeSummary>,
    /// jbd2 ordering rules the trace breaks, each with its witness (after the first,
    /// nothing more was pruned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journal_violations: Vec<String>,
    /// The traced run wrote nothing to PM or the disk: almost always a mistake (the test
    /// wrote where nothing is mounted, the program mapped no PM), never a clean pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub traced_nothing: bool,
    pub timings: Timings,
}

/// Lines that followed the cut instead of being explored: declared run-time data, or lines
/// outside the program's PM.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeSummary {
    /// Distinct lines.
    pub lines: usize,
    /// The failure points where at least one such line was dirty.
    pub failure_points: usize,
}

/// What exploring NT-store prefixes found (the thesis' Suvi-NT line).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtSummary {
    /// Distinct states that, at some failure point, only images with NT stores gave.
    pub dependent_states: usize,
    /// The failure points where NT prefixes were then explored.
    pub failure_points: usize,
    /// Distinct states the NT-prefix images added.
    pub new_states: usize,
}

/// Seconds per stage of a run; a stage that was reused from an earlier, interrupted run
/// has none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<f64>,
    /// `reads`: tracing the recoveries of the fully persisted images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<f64>,
    /// `--reference`: the test on the reference configuration, its states recovered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// Images recovered in the guest (the traced ones of `reads` included).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recoveries: usize,
    /// Of them, recoveries traced for their reads (`reads`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub traced: usize,
    /// Images that took the state of a traced image instead, being equal to it in
    /// every word its recovery read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Timings {
    /// Each stage's name and seconds, in the order a run goes through them, `total` last.
    pub fn stages(&self) -> [(&'static str, Option<f64>); 6] {
        [
            ("trace", self.trace),
            ("reference", self.reference),
            ("reads", self.reads),
            ("images", self.images),
            ("states", self.states),
            ("total", self.total),
        ]
    }

    fn to_text(&self) -> Option<String> {
        let parts: Vec<String> = self
            .stages()
            .iter()
            .filter_map(|(name, seconds)| seconds.map(|s| format!("{name} {s:.1} s")))
            .collect();
        if parts.is_empty() {
            return None;
        }
        let mut text = parts.join(", ");
        if self.recoveries > 0 {
            text += &format!("; {} recoveries in the guest", self.recoveries);
            if self.traced > 0 {
                text += &format!(" ({} traced)", self.traced);
            }
        }
        if self.shared > 0 {
            text += &format!(
                "; {} states shared with a traced image that read the same",
                self.shared
            );
        }
        Some(text)
    }
}

/// The one-letter result of a test in suite tables, serialised as its symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// ✓ every interval atomic.
    Atomic,
    /// A: single final states, but some interval has more than two states.
    AtomicityViolation,
    /// I: single final states, but some state breaks one of the test's invariants.
    InvariantViolation,
    /// S: some interval has several final states.
    MultipleFinalStates,
    /// R: a final state differs from the reference configuration's or from the test's
    /// `expect`.
    WrongFinalState,
    /// E: the recovery of some image failed (the recovery command or the dump).
    ExtractionError,
    /// H: the recovery of some image did not finish in time.
    RecoveryHang,
    /// C: the guest kernel crashed (oops, panic) while recovering some image.
    RecoveryCrash,
    /// !: the test could not be run (its workload failed, or the tool did).
    NotRun,
    /// N: the traced run wrote nothing to PM or the disk, so nothing was tested.
    NothingTraced,
}

impl Mark {
    pub const ALL: [Mark; 10] = [
        Mark::Atomic,
        Mark::AtomicityViolation,
        Mark::InvariantViolation,
        Mark::WrongFinalState,
        Mark::MultipleFinalStates,
        Mark::ExtractionError,
        Mark::RecoveryHang,
        Mark::RecoveryCrash,
        Mark::NotRun,
        Mark::NothingTraced,
    ];

    /// What the mark means, for a legend.
    pub fn meaning(self) -> &'static str {
        match self {
            Mark::Atomic => "every interval atomic",
            Mark::AtomicityViolation => "atomicity violation",
            Mark::InvariantViolation => "invariant broken",
            Mark::MultipleFinalStates => "several final states",
            Mark::WrongFinalState => "final state differs from the reference or expect",
            Mark::ExtractionError => "recovery failed",
            Mark::RecoveryHang => "recovery hung",
            Mark::RecoveryCrash => "guest kernel crashed in recovery",
            Mark::NotRun => "could not be run",
            Mark::NothingTraced => "nothing written to PM or the disk: nothing tested",
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Mark::Atomic => "✓",
            Mark::AtomicityViolation => "A",
            Mark::InvariantViolation => "I",
            Mark::MultipleFinalStates => "S",
            Mark::WrongFinalState => "R",
            Mark::ExtractionError => "E",
            Mark::RecoveryHang => "H",
            Mark::RecoveryCrash => "C",
            Mark::NotRun => "!",
            Mark::NothingTraced => "N",
        }
    }
}

impl Serialize for Mark {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.symbol())
    }
}

impl<'de> Deserialize<'de> for Mark {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Mark, D::Error> {
        let symbol = String::deserialize(d)?;
        Mark::ALL
            .into_iter()
            .find(|m| m.symbol() == symbol)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown result mark `{symbol}`")))
    }
}

impl Report {
    pub fn violations(&self) -> usize {
        self.checkpoints.iter().filter(|c| c.violated()).count()
    }

    /// Whether the run is a clean pass: no violation, and something was tested.
    pub fn passed(&self) -> bool {
        self.violations() == 0 && !self.traced_nothing
    }

    /// The worst finding: a kernel crash, then a hang, other extraction errors, multiple
    /// final states, a wrong final state, broken invariants, atomicity violations (of
    /// intervals without invariants). Several final states come before a wrong one: at
    /// most one of them can be the right one, so the others always differ from it.
    pub fn mark(&self) -> Mark {
        let errors = || self.checkpoints.iter().flat_map(|c| &c.errors);
        if errors().any(|e| e.outcome == Outcome::GuestCrash) {
            Mark::RecoveryCrash
        } else if errors().any(|e| e.outcome == Outcome::Hang) {
            Mark::RecoveryHang
        } else if errors().next().is_some() {
            Mark::ExtractionError
        } else if self.checkpoints.iter().any(|c| !c.single_final_state) {
            Mark::MultipleFinalStates
        } else if self.checkpoints.iter().any(|c| c.final_state_differs()) {
            Mark::WrongFinalState
        } else if (self.checkpoints.iter()).any(|c| c.invariant.as_ref().is_some_and(|i| !i.holds))
        {
            Mark::InvariantViolation
        } else if self.checkpoints.iter().any(|c| c.violated()) {
            Mark::AtomicityViolation
        } else if self.traced_nothing {
            Mark::NothingTraced
        } else {
            Mark::Atomic
        }
    }

    /// `report.txt`: one block per checkpoint interval.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "test {} on {} (cache {}, strategy {}): {}",
            self.test,
            self.fs,
            self.cache,
            self.strategy,
            match self.violations() {
                0 => "no violation".to_string(),
                n => format!("{n} of {} intervals violated", self.checkpoints.len()),
            }
        );
        if self.traced_nothing {
            let _ = writeln!(
                t,
                "nothing tested: the traced run wrote nothing to PM or the disk (does the \
                 test write where the configuration mounts its file system, /mnt? does the \
                 program map PM?)"
            );
        }
        for c in &self.checkpoints {
            let verdict = verdict_label(c);
            let _ = writeln!(t, "\ncheckpoint {} -> {}: {verdict}", c.from, c.to);
            for s in &c.states {
                let final_mark = if c.final_states.contains(&s.name) {
                    " final"
                } else {
                    ""
                };
                let notes: Vec<String> = s
                    .partial_only
                    .then(|| "only from partial images".to_owned())
                    .into_iter()
                    .chain(crate::Media::describe(&s.media))
                    .chain(
                        (s.times_set_by_recovery)
                            .then(|| "some images with times set by recovery".to_owned()),
                    )
                    .collect();
                let notes = match notes.is_empty() {
                    true => String::new(),
                    false => format!(" ({})", notes.join("; ")),
                };
                let _ = writeln!(
                    t,
                    "  {:<7} {:<15}{final_mark}{notes}  failure points {}; {} image(s)",
                    s.name,
                    s.outcome,
                    abbreviate(&s.failure_points),
                    s.images.len()
                );
                let dirty =
                    |l: &&crate::StateLines| !l.explored.is_empty() || !l.skipped.is_empty();
                if let Some(lines) = s.lines.as_ref().filter(dirty) {
                    let _ = writeln!(
                        t,
                        "          at failure point {}: explored {}; skipped {}",
                        lines.point,
                        line_list(&lines.explored),
                        match lines.skipped.len() {
                            0 => "none".to_owned(),
                            n => format!("{n} line(s) recovery does not read"),
                        }
                    );
                }
            }
            for b in c.invariant.iter().flat_map(|i| &i.broken) {
                let _ = writeln!(
                    t,
                    "  invariant `{}` broken in {}: {}",
                    b.invariant, b.state, b.why
                );
            }
            for check in [&c.reference, &c.expected].into_iter().flatten() {
                let what = match check.against.as_str() {
                    "expect" => "expected".to_owned(),
                    config => format!("reference {config}"),
                };
                for d in &check.differs {
                    let _ = writeln!(
                        t,
                        "  final state {} differs from {what} (- {}, + {0}):",
                        d.state, check.against
                    );
                    for line in d.diff.lines() {
                        let _ = writeln!(t, "      {line}");
                    }
                }
            }
            for e in &c.errors {
                let first = telling_lines(&e.output).first().copied().unwrap_or("");
                let _ = writeln!(t, "  error in {}: {}: {first}", e.state, e.outcome);
                for line in excerpt(&e.output) {
                    let _ = writeln!(t, "      {line}");
                }
            }
            culprits_text(&mut t, &c.culprits);
        }
        if let Some(nt) = &self.nt_prefixes {
            let _ = write!(
                t,
                "\nNT prefixes: {} NT-dependent states",
                nt.dependent_states
            );
            let _ = match nt.failure_points {
                0 => writeln!(t),
                n => writeln!(
                    t,
                    " at {n} failure points; their NT-store prefixes gave {} new states",
                    nt.new_states
                ),
            };
        }
        if let Some(runtime) = &self.runtime_data {
            let _ = writeln!(
                t,
                "\nRun-time data: {} dirty lines the program declared run-time data \
                 (`hypercall volatile`) followed the cut at {} failure points, not explored",
                runtime.lines, runtime.failure_points
            );
        }
        if let Some(protected) = &self.journal_protected {
            let _ = writeln!(
                t,
                "\nJournal: {} dirty lines a journal or log protects (jbd2: its blocks before \
                 their commit, in-place writes it replays; XFS: log record bodies; DPWC: \
                 entries past their chunk's `used`; dm-writecache: blocks not committed; \
                 ZIL-PMEM: lines past each chunk's last header; the ZIL: its blocks' bodies; \
                 libpmemobj: ranges its undo or redo logs restore) followed the cut at {} \
                 failure points, not explored (`--scope all` explores them)",
                protected.lines, protected.failure_points
            );
        }
        for violation in &self.journal_violations {
            let _ = writeln!(t, "\n{violation}");
        }
        if let Some(outside) = &self.outside_program {
            let _ = writeln!(
                t,
                "
Program scope: {} dirty lines outside the PM the program accessed (the \
                 kernel's: file-system metadata, its journal) followed the cut at {} failure \
                 points, not explored (`--scope all` explores them)",
                outside.lines, outside.failure_points
            );
        }
        if let Some(timings) = self.timings.to_text() {
            let _ = writeln!(t, "\ntimings: {timings}");
        }
        t
    }
}

/// Telling lines of a failed recovery's output shown in the text; report.json has all of it.
const ERROR_LINES: usize = 4;
/// The first and the last lines of a failed recovery's output shown in the text.
const FIRST_LINES: usize = 4;
const LAST_LINES: usize = 2;

/// What a person needs of a failed recovery's console output: the lines where the kernel
/// or the recovery command say what went wrong (an oops, `EXT4-fs error`, "Structure
/// needs cleaning"), else its first line.
pub fn telling_lines(output: &str) -> Vec<&str> {
    const SIGNS: [&str; 11] = [
        "kernel oops",
        "RIP: ",
        "error",
        "Error",
        "BUG",
        "Oops",
        "panic",
        "WARNING",
        "corrupt",
        "Corrupt",
        "Structure needs cleaning",
    ];
    let mut lines: Vec<&str> = Vec::new();
    for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if SIGNS.iter().any(|s| line.contains(s)) && !lines.contains(&line) {
            lines.push(line);
        }
        if lines.len() == ERROR_LINES {
            break;
        }
    }
    if lines.is_empty() {
        lines.extend(output.lines().map(str::trim).find(|l| !l.is_empty()));
    }
    lines
}

/// The lines of a failed recovery's output that report.txt shows, in output order: its
/// first lines (what failed and how: a crash's `kernel oops in FUNCTION` and headlines, a
/// failed dump's command and exit code), the telling lines after them, and its last lines
/// (a shell's "Segmentation fault", a program's last words); `…` where lines are left out.
fn excerpt(output: &str) -> Vec<&str> {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let telling = telling_lines(output);
    let last = lines.len().saturating_sub(LAST_LINES);
    let mut shown = Vec::new();
    let mut left_out = false;
    for (i, &line) in lines.iter().enumerate() {
        if i < FIRST_LINES || i >= last || telling.contains(&line) {
            if left_out {
                shown.push("…");
                left_out = false;
            }
            shown.push(line);
        } else {
            left_out = true;
        }
    }
    shown
}

/// Call sites shown per kind of culprit; report.json has them all.
const SITES_SHOWN: usize = 8;

/// The code behind an interval's violation, kinds in `find_culprits`' order (most relevant
/// first), and within each kind the most relevant sites, then those with most stores.
fn culprits_text(t: &mut String, culprits: &[crate::Culprit]) {
    let hex =
        |values: &[u64]| -> Vec<String> { values.iter().map(|v| format!("{v:#x}")).collect() };
    for (kind, sites) in culprits_by_kind(culprits) {
        let total: usize = sites.iter().map(|c| c.stores).sum();
        let (what, at) = match sites.first().is_some_and(|c| c.disk) {
            true => ("disk write(s)", "offsets"),
            false => ("store(s)", "lines"),
        };
        let _ = writeln!(t, "  code: {kind}: {total} {what}");
        for c in sites.iter().take(SITES_SHOWN) {
            if c.entries.is_empty() {
                continue;
            }
            let entries: Vec<String> = c.entries.iter().map(u64::to_string).collect();
            let more = if c.stores > c.entries.len() {
                ", …"
            } else {
                ""
            };
            let _ = writeln!(
                t,
                "    {} by {}\n      entries {}{more}; {at} {}",
                c.stores,
                c.site,
                entries.join(", "),
                hex(&c.lines).join(", "),
            );
        }
        if sites.len() > SITES_SHOWN {
            let rest: usize = sites[SITES_SHOWN..].iter().map(|c| c.stores).sum();
            let _ = writeln!(
                t,
                "    and {rest} {what} by {} other sites (report.json lists them)",
                sites.len() - SITES_SHOWN
            );
        }
    }
}

/// The culprits by kind, kinds in `find_culprits`' order (most relevant first), and within
/// each kind the most relevant sites first, then those with most stores.
pub fn culprits_by_kind(culprits: &[crate::Culprit]) -> Vec<(&str, Vec<&crate::Culprit>)> {
    let mut kinds: Vec<(&str, Vec<&crate::Culprit>)> = Vec::new();
    for c in culprits {
        match kinds.iter_mut().find(|(kind, _)| *kind == c.what) {
            Some((_, sites)) => sites.push(c),
            None => kinds.push((&c.what, vec![c])),
        }
    }
    for (_, sites) in &mut kinds {
        sites.sort_by_key(|c| (c.relevance, std::cmp::Reverse(c.stores)));
    }
    kinds
}

/// `0x40, 0x80, … (9 in all)`, or `none`.
fn line_list(lines: &[u64]) -> String {
    const SHOWN: usize = 6;
    let shown: Vec<String> = lines
        .iter()
        .take(SHOWN)
        .map(|l| format!("{l:#x}"))
        .collect();
    match lines.len() {
        0 => "none".to_owned(),
        n if n > SHOWN => format!("{}, … ({n} in all)", shown.join(", ")),
        _ => shown.join(", "),
    }
}

/// `1, 5, 9, … (12 in all)` for long lists.
pub fn abbreviate(points: &[u64]) -> String {
    const SHOWN: usize = 6;
    let shown: Vec<String> = points.iter().take(SHOWN).map(u64::to_string).collect();
    if points.len() > SHOWN {
        format!("{}, … ({} in all)", shown.join(", "), points.len())
    } else {
        shown.join(", ")
    }
}

/// "atomic", or every violation of the interval: a failed recovery does not hide that the
/// interval also has several final states or too many states. With invariants, whether
/// they hold, and more than two states are no violation.
pub fn verdict_label(c: &CheckpointVerdict) -> String {
    let holds = c.invariant.as_ref().map(|i| i.holds);
    let right = final_state_label(c);
    match (c.violated(), c.atomic, holds) {
        (false, true, None) => return format!("atomic{right}"),
        (false, true, Some(_)) => return format!("atomic, invariant holds{right}"),
        (false, false, _) => {
            return format!(
                "invariant holds (not atomic: {} states){right}",
                c.states.len()
            )
        }
        _ => {}
    }
    let mut violations = Vec::new();
    if !c.errors.is_empty() {
        violations.push(match c.errors.len() {
            1 => "recovery failed".to_string(),
            n => format!("recovery failed ({n} states)"),
        });
    }
    if !c.single_final_state {
        violations.push(format!("{} final states", c.final_states.len()));
    }
    match &c.invariant {
        Some(i) if !i.holds => {
            let states: BTreeSet<&str> = i.broken.iter().map(|b| b.state.as_str()).collect();
            violations.push(format!("invariant broken ({} states)", states.len()));
        }
        Some(_) => {}
        None if c.states.len() > 2 => {
            violations.push(format!("not atomic ({} states)", c.states.len()))
        }
        None => {}
    }
    for (check, what) in [(&c.reference, "reference"), (&c.expected, "expected")] {
        if check.as_ref().is_some_and(|check| !check.matches()) {
            violations.push(format!("final state differs from {what}"));
        }
    }
    format!("VIOLATION: {}", violations.join(", "))
}

/// What an interval without violations says of its final state's checks: `, final state
/// as on the reference` and `, final state as expected`.
fn final_state_label(c: &CheckpointVerdict) -> String {
    let mut label = String::new();
    if c.reference.is_some() {
        label.push_str(", final state as on the reference");
    }
    if c.expected.is_some() {
        label.push_str(", final state as expected");
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::StateInfo;

    #[test]
    fn the_timings_line_counts_only_the_recoveries_a_run_had() {
        let global_prefix = Timings {
            images: Some(2.0),
            recoveries: 5,
            ..Timings::default()
        };
        assert_eq!(
            global_prefix.to_text().unwrap(),
            "images 2.0 s; 5 recoveries in the guest"
        );
        let reads = Timings {
            traced: 2,
            shared: 3,
            ..global_prefix
        };
        assert_eq!(
            reads.to_text().unwrap(),
            "images 2.0 s; 5 recoveries in the guest (2 traced); 3 states shared with a \
             traced image that read the same"
        );
    }

    #[test]
    fn a_failed_recovery_shows_what_the_kernel_and_the_tool_said() {
        let output = "mount -o dax /dev/pmem0 /mnt\n\
            EXT4-fs (pmem0): mounted filesystem\n\
            EXT4-fs error (device pmem0): ext4_lookup:1785: inode #2: comm ls: deleted inode referenced: 12\n\
            ls: /mnt/a: Structure needs cleaning\n";
        assert_eq!(
            telling_lines(output),
            [
                "EXT4-fs error (device pmem0): ext4_lookup:1785: inode #2: comm ls: deleted inode referenced: 12",
                "ls: /mnt/a: Structure needs cleaning"
            ]
        );
        assert_eq!(telling_lines("\nno such file\n"), ["no such file"]);
        assert!(telling_lines("").is_empty());
    }

    #[test]
    fn report_text_shows_the_first_telling_and_last_lines_of_a_failed_recovery() {
        let program: Vec<String> = (1..=10).map(|i| format!("replaying record {i}")).collect();
        let output = format!(
            "`my-recovery /dev/pmem0` failed with exit code 139:\n{}\n\
             EXT4-fs error (device pmem0): bad block\nSegmentation fault",
            program.join("\n")
        );
        let crash = "kernel oops in ext4_fill_super\n\
            BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
            #PF: supervisor read access in kernel mode\n\
            Oops: 0000 [#1] PREEMPT SMP NOPTI\n\
            RIP: 0010:ext4_fill_super+0x10/0x20\n\
            Call Trace:\n mount_bdev+0x1/0x2\n vfs_get_tree+0x1/0x2\n path_mount+0x1/0x2";
        let verdict = CheckpointVerdict {
            from: 0,
            to: 1,
            states: Vec::new(),
            final_states: Vec::new(),
            single_final_state: true,
            atomic: false,
            errors: vec![
                crate::verdict::ErrorInfo {
                    state: "c0s1".into(),
                    outcome: Outcome::RecoveryError,
                    output,
                },
                crate::verdict::ErrorInfo {
                    state: "c0s2".into(),
                    outcome: Outcome::GuestCrash,
                    output: crash.into(),
                },
            ],
            culprits: Vec::new(),
            invariant: None,
            reference: None,
            expected: None,
        };
        let report = Report {
            test: "t".into(),
            fs: "f".into(),
            cache: CacheMode::Volatile,
            strategy: Strategy::ProgramOrder,
            checkpoints: vec![verdict],
            nt_prefixes: None,
            runtime_data: None,
            outside_program: None,
            journal_protected: None,
            journal_violations: Vec::new(),
            traced_nothing: false,
            timings: Timings::default(),
        };
        let text = report.to_text();
        assert!(
            text.contains(
                "  error in c0s1: recovery-error: EXT4-fs error (device pmem0): bad block\n      \
                 `my-recovery /dev/pmem0` failed with exit code 139:\n      \
                 replaying record 1\n      replaying record 2\n      replaying record 3\n      \
                 …\n      EXT4-fs error (device pmem0): bad block\n      Segmentation fault\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  error in c0s2: guest-crash: kernel oops in ext4_fill_super\n      \
                 kernel oops in ext4_fill_super\n      BUG: kernel NULL pointer dereference"
            ),
            "{text}"
        );
        assert!(
            text.contains("RIP: 0010:ext4_fill_super+0x10/0x20"),
            "{text}"
        );
        // a crash is worse than a hang, a hang is told apart from other errors
        let mut report = report;
        assert_eq!(report.mark(), Mark::RecoveryCrash);
        let errors = &mut report.checkpoints[0].errors;
        errors[1].outcome = Outcome::Hang;
        assert_eq!(report.mark(), Mark::RecoveryHang);
        report.checkpoints[0].errors.pop();
        assert_eq!(report.mark(), Mark::ExtractionError);
    }

    #[test]
    fn marks_serialise_as_their_symbols() {
        for mark in Mark::ALL {
            let json = serde_json::to_string(&mark).unwrap();
            assert_eq!(json, format!("\"{}\"", mark.symbol()));
            assert_eq!(serde_json::from_str::<Mark>(&json).unwrap(), mark);
        }
        assert!(serde_json::from_str::<Mark>("\"?\"").is_err());
    }

    #[test]
    fn a_wrong_final_state_is_its_own_violation_with_its_diff_and_mark() {
        let state = |k: usize| StateInfo::recovered(&format!("c1s{k}"), vec![1], &k.to_string());
        let check = |against: &str, differs: bool| crate::FinalCheck {
            against: against.into(),
            differs: match differs {
                true => vec![crate::FinalDifference {
                    state: "c1s1".into(),
                    fields: vec!["contents".into()],
                    diff: "- \"contents\": \"Hello\\nWorld\\n\"\n+ \"contents\": \"World\\n\"\n"
                        .into(),
                }],
                false => Vec::new(),
            },
        };
        let mut report = Report {
            test: "append".into(),
            fs: "buggy-fs".into(),
            cache: CacheMode::Volatile,
            strategy: Strategy::ProgramOrder,
            checkpoints: vec![CheckpointVerdict {
                from: 1,
                to: 2,
                states: vec![state(0), state(1)],
                final_states: vec!["c1s1".into()],
                single_final_state: true,
                atomic: true,
                errors: Vec::new(),
                culprits: Vec::new(),
                invariant: None,
                reference: Some(check("ext4-dax", true)),
                expected: None,
            }],
            nt_prefixes: None,
            runtime_data: None,
            outside_program: None,
            journal_protected: None,
            journal_violations: Vec::new(),
            traced_nothing: false,
            timings: Timings::default(),
        };
        assert_eq!(report.violations(), 1, "atomic, and still violated");
        assert_eq!(report.mark(), Mark::WrongFinalState);
        let text = report.to_text();
        assert!(
            text.contains(
                "checkpoint 1 -> 2: VIOLATION: final state differs from reference\n\
                 \x20 c1s0 "
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  final state c1s1 differs from reference ext4-dax (- ext4-dax, + c1s1):\n\
                 \x20     - \"contents\": \"Hello\\nWorld\\n\"\n\
                 \x20     + \"contents\": \"World\\n\"\n"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        let reference = &json["checkpoints"][0]["reference"];
        assert_eq!(reference["against"], "ext4-dax");
        assert_eq!(
            reference["differs"][0]["fields"],
            serde_json::json!(["contents"])
        );
        assert_eq!(serde_json::from_value::<Report>(json).unwrap(), report);

        // The expected contents: the same verdict, named after them.
        let c = &mut report.checkpoints[0];
        c.reference = Some(check("ext4-dax", false));
        c.expected = Some(check("expect", true));
        let text = report.to_text();
        assert!(
            text.contains("VIOLATION: final state differs from expected\n"),
            "{text}"
        );
        assert!(text.contains("  final state c1s1 differs from expected (- expect, + c1s1):"));
        assert_eq!(report.mark(), Mark::WrongFinalState);
        // Several final states are the worse finding (all but one of them differ anyway).
        let c = &mut report.checkpoints[0];
        c.single_final_state = false;
        c.atomic = false;
        c.final_states.push("c1s0".into());
        assert_eq!(report.mark(), Mark::MultipleFinalStates);
        // Right final states say so.
        let c = &mut report.checkpoints[0];
        c.single_final_state = true;
        c.atomic = true;
        c.final_states.pop();
        c.expected = Some(check("expect", false));
        assert_eq!(report.mark(), Mark::Atomic);
        assert!(report.to_text().contains(
            "checkpoint 1 -> 2: atomic, final state as on the reference, final state as expected\n"
        ));
    }

    #[test]
    fn report_json_keeps_its_shape() {
        let report = Report {
            test: "t".into(),
            fs: "ext4-dax".into(),
            cache: CacheMode::Persistent,
            strategy: Strategy::GlobalPrefix,
            checkpoints: Vec::new(),
            nt_prefixes: None,
            runtime_data: None,
            outside_program: None,
            journal_protected: None,
            journal_violations: Vec::new(),
            traced_nothing: false,
            timings: Timings {
                images: Some(1.5),
                ..Timings::default()
            },
        };
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["cache"], "persistent");
        assert_eq!(json["strategy"], "global-prefix");
        assert_eq!(json["timings"], serde_json::json!({"images": 1.5}));
        assert!(json.get("nt_prefixes").is_none());
        let back: Report = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
        assert!(report.to_text().contains("timings: images 1.5 s"));
        assert!(!report.to_text().contains("NT prefixes"));

        let nt = Report {
            strategy: Strategy::Reads,
            nt_prefixes: Some(NtSummary {
                dependent_states: 2,
                failure_points: 3,
                new_states: 1,
            }),
            ..report
        };
        let text = nt.to_text();
        assert!(
            text.contains("NT prefixes: 2 NT-dependent states at 3 failure points; their NT-store prefixes gave 1 new states"),
            "{text}"
        );
        let json = serde_json::to_value(&nt).unwrap();
        assert_eq!(json["nt_prefixes"]["new_states"], 1);
        assert!(json.get("runtime_data").is_none());
        assert!(!text.contains("Run-time data"));

        let runtime = Report {
            runtime_data: Some(RuntimeSummary {
                lines: 4,
                failure_points: 7,
            }),
            ..nt
        };
        let text = runtime.to_text();
        assert!(
            text.contains("Run-time data: 4 dirty lines the program declared run-time data (`hypercall volatile`) followed the cut at 7 failure points"),
            "{text}"
        );
        let json = serde_json::to_value(&runtime).unwrap();
        assert_eq!(
            json["runtime_data"],
            serde_json::json!({"lines": 4, "failure_points": 7})
        );
    }

    #[test]
    fn an_interval_with_two_violations_names_both() {
        let state = |k: usize| {
            StateInfo::recovered(&format!("c1s{k}"), vec![k as u64], &format!("{k:064x}"))
        };
        let interval = |states: usize, finals: usize| CheckpointVerdict {
            from: 1,
            to: 2,
            states: (0..states).map(state).collect(),
            final_states: (0..finals).map(|k| format!("c1s{k}")).collect(),
            single_final_state: finals == 1,
            atomic: false,
            errors: Vec::new(),
            culprits: Vec::new(),
            invariant: None,
            reference: None,
            expected: None,
        };
        let text = |c: CheckpointVerdict| {
            Report {
                test: "t".into(),
                fs: "f".into(),
                cache: CacheMode::Volatile,
                strategy: Strategy::GlobalPrefix,
                checkpoints: vec![c],
                nt_prefixes: None,
                runtime_data: None,
                outside_program: None,
                journal_protected: None,
                journal_violations: Vec::new(),
                traced_nothing: false,
                timings: Timings::default(),
            }
            .to_text()
        };
        let both = text(interval(4, 2));
        assert!(
            both.contains("VIOLATION: 2 final states, not atomic (4 states)"),
            "{both}"
        );
        assert!(text(interval(2, 2)).contains("VIOLATION: 2 final states\n"));
        assert!(text(interval(3, 1)).contains("VIOLATION: not atomic (3 states)"));
        // A failed recovery is named beside the interval's other violation, not instead of it.
        let mut failed = interval(4, 1);
        failed.errors.push(crate::verdict::ErrorInfo {
            state: "c1s2".into(),
            outcome: Outcome::RecoveryError,
            output: "mount: bad superblock".into(),
        });
        let failed = text(failed);
        assert!(
            failed.contains("VIOLATION: recovery failed, not atomic (4 states)"),
            "{failed}"
        );
    }

    #[test]
    fn a_state_names_the_media_its_images_leave_writes_out_of() {
        use crate::Media::{Disk, Pm, PmAndDisk};
        let state = |k: usize, partial_only: bool, media: Vec<crate::Media>| StateInfo {
            partial_only,
            media,
            ..StateInfo::recovered(&format!("c1s{k}"), vec![k as u64], &format!("{k:064x}"))
        };
        let report = Report {
            test: "t".into(),
            fs: "f".into(),
            cache: CacheMode::Volatile,
            strategy: Strategy::ProgramOrder,
            checkpoints: vec![CheckpointVerdict {
                from: 1,
                to: 2,
                states: vec![
                    state(0, false, vec![]),
                    state(1, false, vec![Disk]),
                    state(2, true, vec![PmAndDisk]),
                    state(3, false, vec![Pm, Disk]),
                ],
                final_states: vec!["c1s0".into()],
                single_final_state: true,
                atomic: false,
                errors: Vec::new(),
                culprits: Vec::new(),
                invariant: None,
                reference: None,
                expected: None,
            }],
            nt_prefixes: None,
            runtime_data: None,
            outside_program: None,
            journal_protected: None,
            journal_violations: Vec::new(),
            traced_nothing: false,
            timings: Timings::default(),
        };
        let text = report.to_text();
        let line = |k: usize| {
            let name = format!("  c1s{k} ");
            text.lines().find(|l| l.starts_with(&name)).unwrap()
        };
        assert!(!line(0).contains("from"), "{text}");
        assert!(
            line(1).contains(" (from the disk)  failure points 1;"),
            "{text}"
        );
        assert!(
            line(2).contains(" (only from partial images; from PM and the disk)  "),
            "{text}"
        );
        assert!(line(3).contains(" (from PM or the disk)  "), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        let states = &json["checkpoints"][0]["states"];
        assert!(states[0].get("media").is_none());
        assert_eq!(states[1]["media"], serde_json::json!(["disk"]));
        assert_eq!(states[2]["media"], serde_json::json!(["pm-and-disk"]));
        assert_eq!(states[3]["media"], serde_json::json!(["pm", "disk"]));
        assert_eq!(serde_json::from_value::<Report>(json).unwrap(), report);
    }
}
