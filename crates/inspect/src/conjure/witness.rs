//! Static findings checked against a traced run of the same program: whether the run
//! reached a finding's line (a traced entry's call chain, through the program's line
//! tables, passes it) and whether `persim analyze`'s rule of the same number flagged it
//! there (docs/design/conjurer.md, "Static and dynamic").

use super::Finding;
use crate::patterns::{Kind, Patterns};
use persim_trace::{Entry, SourceLine, Symbols, TraceError};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::borrow::Borrow;

/// What the run says of a static finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunClass {
    /// The run reached the line and the dynamic rule flagged it: a witness.
    Witnessed,
    /// The run reached the line and the dynamic rule did not flag it (the path's
    /// condition did not hold, or the dynamic rule cannot see it).
    ReachedNotFlagged,
    /// No traced entry came from the line: the path needs a workload that runs it.
    NotReached,
}

impl RunClass {
    pub fn text(self) -> &'static str {
        match self {
            RunClass::Witnessed => "witnessed",
            RunClass::ReachedNotFlagged => "reached, not flagged",
            RunClass::NotReached => "never reached",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunCheck {
    pub class: RunClass,
    /// The dynamic finding that witnesses it: kind, code and line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<String>,
}

const RULES: [&str; 6] = ["1", "1a", "1b", "2", "3", "4"];

/// The dynamic kinds of a static rule, and whether their findings are placed at a call
/// site (the pc is then a return address).
fn kinds(rule: &str) -> &'static [(Kind, bool)] {
    match rule {
        "1" => &[(Kind::MissingPersist, false)],
        "1a" => &[(Kind::FlushNotPm, true)],
        "1b" => &[(Kind::PersistShort, false)],
        "2" => &[(Kind::TxUnloggedStore, false)],
        "3" => &[(Kind::TxUninitialisedAlloc, true)],
        "4" => &[(Kind::UseAfterFree, false)],
        _ => &[],
    }
}

/// A dynamic finding: its kind, the lines of its call chain, and its code as text.
#[derive(Debug)]
struct Flag {
    kind: Kind,
    lines: Vec<SourceLine>,
    code: String,
}

/// A traced run by source line: the lines it reached (with the function each is in)
/// and the dynamic findings.
#[derive(Debug, Default)]
pub struct RunLines {
    reached: FxHashMap<(String, u32), Option<String>>,
    flags: Vec<Flag>,
}

impl RunLines {
    /// Reads the trace's entries once; `patterns` are `find_patterns`' of the same trace
    /// and `symbols` its symbols, with the program's line tables.
    pub fn of_trace<E: Borrow<Entry>>(
        entries: impl IntoIterator<Item = Result<E, TraceError>>,
        patterns: &Patterns,
        symbols: &Symbols,
    ) -> Result<RunLines, TraceError> {
        let mut chains = FxHashSet::default();
        for entry in entries {
            let entry = entry?;
            let meta = &entry.borrow().meta;
            if meta.pc.is_some() || !meta.stack.is_empty() {
                chains.insert(
                    meta.pc
                        .iter()
                        .chain(&meta.stack)
                        .copied()
                        .collect::<Vec<_>>(),
                );
            }
        }
        let mut run = RunLines::default();
        for chain in chains {
            run.reach(symbols.source_lines(&chain, false).into_iter().flatten());
        }
        let pc_returns: FxHashMap<Kind, bool> = RULES
            .iter()
            .flat_map(|r| kinds(r).iter().copied())
            .collect();
        for site in &patterns.sites {
            let Some(&returns) = pc_returns.get(&site.kind) else {
                continue;
            };
            for example in &site.examples {
                let frames: Vec<u64> = example.pc.iter().chain(&example.stack).copied().collect();
                let lines: Vec<SourceLine> = symbols
                    .source_lines(&frames, returns)
                    .into_iter()
                    .flatten()
                    .collect();
                let code = match example.pc.and_then(|pc| symbols.resolve(pc)) {
                    Some(at) => at.to_string(),
                    None => example
                        .pc
                        .map_or("no pc".into(), |pc| format!("pc={pc:#x}")),
                };
                run.flags.push(Flag {
                    kind: site.kind,
                    lines,
                    code,
                });
            }
        }
        Ok(run)
    }

    fn reach(&mut self, lines: impl IntoIterator<Item = SourceLine>) {
        for l in lines {
            self.reached.insert((l.file, l.line), l.function);
        }
    }

    /// Whether any line of the program was reached: without, the trace has no stack
    /// traces or the program no line tables, and no finding can be placed.
    pub fn is_empty(&self) -> bool {
        self.reached.is_empty()
    }

    /// The class of `finding`: its lines are its own and, for rules 1 and 3 (reported
    /// where the fence or the commit is), the store's or the allocation's its message
    /// names. A dynamic finding of its rule witnesses it at one of those lines; for rule
    /// 1b also in the same function, as analyze's `persist-short` is placed at the store
    /// the short persist left uncovered, not at the persist.
    pub fn check(&self, finding: &Finding) -> RunCheck {
        let file = finding
            .file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut lines = vec![finding.line];
        lines.extend(line_named(&finding.message));
        let reached: Vec<&Option<String>> = lines
            .iter()
            .filter_map(|&l| self.reached.get(&(file.clone(), l)))
            .collect();
        if reached.is_empty() {
            return RunCheck {
                class: RunClass::NotReached,
                witness: None,
            };
        }
        let functions: Vec<&str> = reached.iter().filter_map(|f| f.as_deref()).collect();
        let witness = self
            .flags
            .iter()
            .filter(|f| kinds(&finding.rule).iter().any(|k| k.0 == f.kind))
            .find_map(|f| {
                f.lines
                    .iter()
                    .find(|l| {
                        l.file == file
                            && (lines.contains(&l.line)
                                || (finding.rule == "1b"
                                    && l.function
                                        .as_deref()
                                        .is_some_and(|n| functions.contains(&n))))
                    })
                    .map(|l| format!("{} at {} ({l})", f.kind.name(), f.code))
            });
        RunCheck {
            class: if witness.is_some() {
                RunClass::Witnessed
            } else {
                RunClass::ReachedNotFlagged
            },
            witness,
        }
    }
}

/// The line a rule 1 or 3 message names: "the PM store at line 12 …", "the object
/// allocated at line 12 …".
fn line_named(message: &str) -> Option<u32> {
    let (_, rest) = message.split_once(" at line ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn line(file: &str, line: u32, function: &str) -> SourceLine {
        SourceLine {
            file: file.into(),
            line,
            function: Some(function.into()),
        }
    }

    fn finding(rule: &str, line: u32, message: &str) -> Finding {
        Finding {
            rule: rule.into(),
            file: PathBuf::from("/src/hashmap/hashmap_tx.c"),
            line,
            column: 9,
            message: message.into(),
            path: Vec::new(),
            run: None,
        }
    }

    /// A run that reached lines 240-251 of hm_tx_remove and 80-81 of calc_pi (in a file
    /// of the same name elsewhere: only the name counts) and flagged a use-after-free at
    /// 251, a tx-unlogged-store at 245 and a persist-short at the store on line 80.
    fn run() -> RunLines {
        let mut run = RunLines::default();
        run.reach((240..=251).map(|l| line("hashmap_tx.c", l, "hm_tx_remove")));
        run.reach([
            line("hashmap_tx.c", 80, "calc_pi"),
            line("hashmap_tx.c", 81, "calc_pi"),
        ]);
        let flag = |kind, lines| Flag {
            kind,
            lines,
            code: "hm_tx_remove+0x504 [pmdk-map]".into(),
        };
        run.flags = vec![
            flag(
                Kind::UseAfterFree,
                vec![line("hashmap_tx.c", 251, "hm_tx_remove")],
            ),
            // The store's line, then its caller's (a call chain).
            flag(
                Kind::TxUnloggedStore,
                vec![
                    line("other.c", 245, "helper"),
                    line("hashmap_tx.c", 245, "hm_tx_remove"),
                ],
            ),
            flag(
                Kind::PersistShort,
                vec![line("hashmap_tx.c", 80, "calc_pi")],
            ),
        ];
        run
    }

    #[test]
    fn a_finding_is_witnessed_reached_or_not_reached_by_its_lines_and_rule() {
        let run = run();
        assert!(!run.is_empty());
        let check = |f: Finding| run.check(&f);
        let witnessed = check(finding("4", 251, "a load from a PM object freed"));
        assert_eq!(witnessed.class, RunClass::Witnessed);
        assert_eq!(
            witnessed.witness.as_deref(),
            Some("use-after-free at hm_tx_remove+0x504 [pmdk-map] (hashmap_tx.c:251)")
        );
        // A caller's line in the chain witnesses too.
        assert_eq!(
            check(finding("2", 245, "a PM store")).class,
            RunClass::Witnessed
        );
        // Reached, but flagged by another rule, or not at this line.
        assert_eq!(
            check(finding("2", 251, "a PM store")).class,
            RunClass::ReachedNotFlagged
        );
        assert_eq!(
            check(finding("4", 250, "a load")).class,
            RunClass::ReachedNotFlagged
        );
        assert_eq!(
            check(finding("4", 252, "a load")),
            RunCheck {
                class: RunClass::NotReached,
                witness: None
            }
        );
        let mut elsewhere = finding("4", 251, "a load");
        elsewhere.file = PathBuf::from("hashmap_rp.c");
        assert_eq!(run.check(&elsewhere).class, RunClass::NotReached);
    }

    #[test]
    fn rule_1b_is_witnessed_in_its_function_and_rules_1_and_3_at_the_line_named() {
        let run = run();
        // The short persist at 81, analyze's persist-short at the store on 80.
        assert_eq!(
            run.check(&finding("1b", 81, "pmemobj_persist flushes 8 bytes"))
                .class,
            RunClass::Witnessed
        );
        // Rule 2 gets no such leeway: 244 is not 245.
        assert_eq!(
            run.check(&finding("2", 244, "a PM store")).class,
            RunClass::ReachedNotFlagged
        );
        // Reported at a fence the run never reached, the store at a line it did.
        let rule1 = finding(
            "1",
            300,
            "the PM store at line 80 is not flushed before this fence",
        );
        assert_eq!(run.check(&rule1).class, RunClass::ReachedNotFlagged);
        let mut flagged = RunLines::default();
        flagged.reach([line("hashmap_tx.c", 80, "calc_pi")]);
        flagged.flags.push(Flag {
            kind: Kind::MissingPersist,
            lines: vec![line("hashmap_tx.c", 80, "calc_pi")],
            code: "calc_pi+0x10".into(),
        });
        assert_eq!(flagged.check(&rule1).class, RunClass::Witnessed);
        assert_eq!(line_named("the object allocated at line 12 is"), Some(12));
        assert_eq!(line_named("a load from a PM object"), None);
    }
}
