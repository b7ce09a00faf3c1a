//! `persim report DIR --html FILE`: one self-contained HTML page of a run, a campaign or a
//! fault campaign, to open from a mail attachment or a CI artifact (and the pages of
//! `persim profile --html` and `persim efficiency run --html`: a table and its plots). Nothing is loaded
//! from anywhere: the style, the filter script and the SVG plots are inline. The page shows
//! what the text reports show, through the same functions (a run's verdicts, `--diff`'s
//! state diffs, the culprits; a campaign's results and signature groups; the faults'
//! summary and its plot; a profile's or a series' plots); maud escapes every value.

use crate::commands::report::{state_diffs, StateDiff};
use anyhow::{Context, Result};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use persim_analyze::{
    abbreviate, culprits_by_kind, fault_summary_svg, telling_lines, verdict_label,
    CheckpointVerdict, Culprit, FaultOutcome, Mark, Media, Report,
};
use persim_tester::{FaultsReport, RunDir, SuiteResults};
use std::path::Path;
use strum::IntoEnumIterator;

/// The page's look: plain, readable in print, verdicts in colour.
const STYLE: &str = "
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; margin: 1.2em 0 .4em; } h4 { font-size: 1em; margin: .8em 0 .3em; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: .4em 0 1em; }
th, td { padding: .2em .7em; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #17692b; } .bad { color: #b3141b; font-weight: 600; }
.verdict { padding: .1em .5em; border-radius: .3em; }
.verdict.ok { background: #e3f4e6; } .verdict.bad { background: #fde5e5; }
pre, code { font: 13px/1.35 ui-monospace, monospace; }
pre { background: #f7f7f7; padding: .5em .8em; overflow-x: auto; border-left: 3px solid #ddd; }
pre.diff span { display: block; white-space: pre-wrap; overflow-wrap: anywhere; } mark { background: #ffd863; color: inherit; } .add { background: #e6ffec; color: #116329; } .del { background: #ffebe9; color: #82071e; }
ol.frames { margin: .2em 0 .6em; padding-left: 2em; } ol.frames li:first-child { font-weight: 600; }
.interval { border: 1px solid #ddd; border-radius: .4em; padding: .2em 1em .6em; margin: 1em 0; }
.filters { margin: .6em 0; } .filters label { margin-right: 1.2em; }
td.mark { text-align: center; } details > summary { cursor: pointer; } figure { margin: 1em 0; } figcaption { color: #555; } svg { max-width: 100%; height: auto; }
";

/// Shows the campaign table's rows that match both filters.
const FILTER_SCRIPT: &str = "
function filterRows() {
  var mark = document.getElementById('mark').value;
  var sig = document.getElementById('signature').value;
  var shown = 0;
  document.querySelectorAll('#results tbody tr').forEach(function (row) {
    var show = (mark === '' || row.dataset.mark === mark) &&
               (sig === '' || row.dataset.signature === sig);
    row.hidden = !show;
    if (show) { shown++; }
  });
  document.getElementById('shown').textContent = shown;
}
// A link to a failing test opens its report.
function openTarget() {
  var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (target && target.tagName === 'DETAILS') { target.open = true; }
}
window.addEventListener('hashchange', openTarget);
window.addEventListener('load', openTarget);
";

/// A whole page around `body`.
fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    }
    .into_string()
}

/// The page of one run directory: its report with `--diff`'s evidence.
pub fn run_page(dir: &RunDir, report: &Report) -> Result<String> {
    let title = format!("persim: {} on {}", report.test, report.fs);
    let body = html! {
        h1 { "Test " (report.test) " on " (report.fs) }
        (run_body(dir, report)?)
    };
    Ok(page(&title, body))
}

fn verdict_class(bad: bool) -> &'static str {
    match bad {
        true => "verdict bad",
        false => "verdict ok",
    }
}

/// A run's report below its heading (also a campaign's failing test's).
fn run_body(dir: &RunDir, report: &Report) -> Result<Markup> {
    let mark = report.mark();
    let summary = match report.violations() {
        0 => "no violation".to_owned(),
        n => format!("{n} of {} intervals violated", report.checkpoints.len()),
    };
    let mut intervals = Vec::new();
    for c in &report.checkpoints {
        let diffs = match c.violated() {
            true => state_diffs(dir, c)?,
            false => Vec::new(),
        };
        intervals.push(interval(c, &diffs));
    }
    let timings: Vec<(&str, f64)> = (report.timings.stages().into_iter())
        .filter_map(|(stage, seconds)| Some((stage, seconds?)))
        .collect();
    Ok(html! {
        p.meta {
            "cache " (report.cache) ", strategy " (report.strategy) ": "
            span class=(verdict_class(mark != Mark::Atomic)) {
                (mark.symbol()) " " (summary)
            }
        }
        @for i in intervals { (i) }
        @if let Some(nt) = &report.nt_prefixes {
            p { "NT prefixes: " (nt.dependent_states) " NT-dependent states at "
                (nt.failure_points) " failure points; their NT-store prefixes gave "
                (nt.new_states) " new states." }
        }
        @if let Some(runtime) = &report.runtime_data {
            p { "Run-time data: " (runtime.lines) " dirty lines the program declared run-time
                data followed the cut at " (runtime.failure_points) " failure points, not explored." }
        }
        @if !timings.is_empty() {
            h3 { "Timings" }
            table.timings {
                tr { @for (stage, _) in &timings { th { (stage) } } }
                tr { @for (_, seconds) in &timings { td.num { (format!("{seconds:.1} s")) } } }
            }
        }
    })
}

/// One checkpoint interval: its verdict, its states, and the evidence of a violation.
fn interval(c: &CheckpointVerdict, diffs: &[StateDiff]) -> Markup {
    let id = format!("checkpoint-{}-{}", c.from, c.to);
    html! {
        section.interval id=(id) {
            h2 { "Checkpoint " (c.from) " → " (c.to) ": "
                span class=(verdict_class(c.violated())) { (verdict_label(c)) } }
            table.states {
                tr { th { "state" } th { "outcome" } th { "final" } th { "notes" }
                     th { "failure points" } th { "images" } }
                @for s in &c.states {
                    tr {
                        td { code { (s.name) } }
                        td { (s.outcome) }
                        td { @if c.final_states.contains(&s.name) { "final" } }
                        td {
                            @if s.partial_only { "only from partial images " }
                            @if let Some(media) = Media::describe(&s.media) { (media) }
                        }
                        td { (abbreviate(&s.failure_points)) }
                        td.num { (s.images.len()) }
                    }
                }
            }
            @for b in c.invariant.iter().flat_map(|i| &i.broken) {
                p.bad { "invariant " code { (b.invariant) } " broken in " (b.state) ": " (b.why) }
            }
            @for check in [&c.reference, &c.expected].into_iter().flatten() {
                @for d in &check.differs {
                    h3 { "Final state " (d.state) " differs from " (check.against)
                         " (− " (check.against) ", + " (d.state) ")" }
                    (diff_block(&d.diff))
                }
            }
            @if !diffs.is_empty() {
                h3 { "State diffs" }
                @for d in diffs {
                    details open {
                        summary { "diff " code { (d.from) } " → " code { (d.to) } }
                        (diff_block(&d.diff))
                    }
                }
            }
            @for e in &c.errors {
                h3 { "Recovery of " (e.state) ": " span.bad { (e.outcome) } }
                @let telling = telling_lines(&e.output);
                pre { @for line in &telling { (line) "\n" } }
                details {
                    summary { "what the guest printed (" (e.output.lines().count()) " lines)" }
                    pre { (e.output) }
                }
            }
            @if !c.culprits.is_empty() {
                h3 { "The code behind it" }
                (culprits(&c.culprits))
            }
        }
    }
}

/// A line diff as `line_diff` writes it, removed and added lines marked. Where k removed
/// lines are followed by k added ones, each pair's differing middle is marked and a long
/// unchanged start or end is cut to its last or first `CONTEXT_CHARS` (a file's contents
/// are one line of a state: the byte that differs must show without scrolling).
fn diff_block(diff: &str) -> Markup {
    let lines: Vec<&str> = diff.lines().collect();
    let tag = |line: &str| line.as_bytes().first().copied();
    // For each line, the middle (as byte range) that differs from its pair's, if paired.
    let mut middles: Vec<Option<(usize, usize)>> = vec![None; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        let removed = lines[i..]
            .iter()
            .take_while(|l| tag(l) == Some(b'-'))
            .count();
        let added = (lines[i + removed..].iter())
            .take_while(|l| tag(l) == Some(b'+'))
            .count();
        if removed > 0 && removed == added {
            for k in i..i + removed {
                let (old, new) = differing_middles(lines[k], lines[k + removed]);
                middles[k] = Some(old);
                middles[k + removed] = Some(new);
            }
        }
        i += (removed + added).max(1);
    }
    html! {
        pre.diff {
            @for (line, middle) in lines.iter().zip(&middles) {
                @let class = match tag(line) {
                    Some(b'+') => Some("add"),
                    Some(b'-') => Some("del"),
                    _ => None,
                };
                span class=[class] {
                    @match middle {
                        Some((start, end)) => {
                            (cut_start(&line[..*start])) mark { (line[*start..*end]) }
                            (cut_end(&line[*end..]))
                        }
                        None => (line),
                    }
                }
            }
        }
    }
}

/// Characters of a changed line kept before and after what changed, when there are more
/// than `LONG` (a file's contents, not a field's name and value).
const CONTEXT_CHARS: usize = 40;
const LONG: usize = 100;

/// The byte ranges of `old` and `new` (diff lines) between their common start (after the
/// `-`/`+`) and their common end.
fn differing_middles(old: &str, new: &str) -> ((usize, usize), (usize, usize)) {
    let prefix = (old.char_indices().skip(1))
        .zip(new.char_indices().skip(1))
        .find(|((_, a), (_, b))| a != b)
        .map_or(old.len().min(new.len()), |((at, _), _)| at);
    let suffix = (old[prefix..].chars().rev())
        .zip(new[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum::<usize>();
    ((prefix, old.len() - suffix), (prefix, new.len() - suffix))
}

/// The line's unchanged start: when long, its first two characters (the `-`/`+` column)
/// and the last `CONTEXT_CHARS` before the change.
fn cut_start(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= LONG {
        return text.to_owned();
    }
    let kept: String = chars[chars.len() - CONTEXT_CHARS..].iter().collect();
    format!("{}…{kept}", chars[..2].iter().collect::<String>())
}

/// The line's unchanged end: when long, its first `CONTEXT_CHARS`.
fn cut_end(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= LONG {
        return text.to_owned();
    }
    format!("{}…", chars[..CONTEXT_CHARS].iter().collect::<String>())
}

/// The culprits by kind (`culprits_by_kind`), each site's call chain innermost first.
fn culprits(culprits: &[Culprit]) -> Markup {
    html! {
        @for (kind, sites) in culprits_by_kind(culprits) {
            h4 { (kind) }
            @for c in sites {
                @let (what, at) = if c.disk { ("disk write(s)", "offsets") } else { ("store(s)", "lines") };
                @let lines: Vec<String> = c.lines.iter().map(|l| format!("{l:#x}")).collect();
                p { (c.stores) " " (what) "; " (at) " " code { (lines.join(", ")) } }
                ol.frames { @for frame in c.site.split(" < ") { li { code { (frame) } } } }
            }
        }
    }
}

/// The page of a campaign (or suite): the results with filters, the groups of failing tests
/// by signature, and each failing test's run report, found by `run_dir`.
pub fn campaign_page(
    results: &SuiteResults,
    run_dir: impl Fn(&str) -> Option<RunDir>,
) -> Result<String> {
    let title = format!("persim: {} on {}", results.suite, results.fs);
    let failing: Vec<_> = results
        .tests
        .iter()
        .filter(|t| t.mark != Mark::Atomic)
        .collect();
    let groups = results.groups();
    let mut signatures: Vec<&str> = groups.iter().map(|g| g.signature).collect();
    signatures.sort();
    let mut runs = Vec::new();
    for test in &failing {
        let run = match run_dir(&test.test) {
            Some(dir) if dir.report_json().exists() => {
                let report = dir.read_report()?;
                Some(run_body(&dir, &report)?)
            }
            _ => None,
        };
        runs.push((test, run));
    }
    let marks: Vec<Mark> = (Mark::ALL.into_iter())
        .filter(|m| results.tests.iter().any(|t| t.mark == *m))
        .collect();
    let shards: Vec<String> = results.shards.iter().map(|s| s.to_string()).collect();
    let body = html! {
        h1 { "Campaign " (results.suite) " on " (results.fs) }
        p.meta {
            "cache " (results.cache) ", strategy " (results.strategy)
            @if let Some(r) = &results.reference { ", against reference " (r) }
            @if !shards.is_empty() { ", shards " (shards.join(" ")) }
            ": "
            span class=(verdict_class(results.failed())) {
                (failing.len()) " of " (results.tests.len()) " tests failed, "
                (groups.len()) " distinct problem(s)"
            }
        }
        table.legend {
            tr { th { "result" } th { "meaning" } th { "tests" } }
            @for m in &marks {
                tr { td { (m.symbol()) } td { (m.meaning()) }
                     td.num { (results.tests.iter().filter(|t| t.mark == *m).count()) } }
            }
        }
        @if !groups.is_empty() {
            h2 { "Failing tests by signature" }
            table.groups {
                tr { th { "tests" } th { "signature" } th { "e.g." } }
                @for g in &groups {
                    tr {
                        td.num { (g.tests.len()) }
                        td { code { (g.signature) } }
                        td { @for (i, t) in g.tests.iter().take(3).enumerate() {
                            @if i > 0 { ", " }
                            a href=(format!("#run-{t}")) { (t) }
                        } @if g.tests.len() > 3 { " and " (g.tests.len() - 3) " more" } }
                    }
                }
            }
        }
        h2 { "Results" }
        div.filters {
            label { "result " select #mark onchange="filterRows()" {
                option value="" { "any" }
                @for m in &marks { option value=(m.symbol()) { (m.symbol()) " " (m.meaning()) } }
            } }
            label { "signature " select #signature onchange="filterRows()" {
                option value="" { "any" }
                @for s in &signatures { option value=(s) { (s) } }
            } }
            span { span #shown { (results.tests.len()) } " of " (results.tests.len()) " tests shown" }
        }
        table #results {
            thead { tr { th { "test" } th { "result" } th { "violations" } th { "seconds" }
                         th { "signature" } } }
            tbody {
                @for t in &results.tests {
                    tr data-mark=(t.mark.symbol())
                       data-signature=(t.signature.as_deref().unwrap_or("")) {
                        td { @if t.mark == Mark::Atomic { (t.test) }
                             @else { a href=(format!("#run-{}", t.test)) { (t.test) } } }
                        td.mark.ok[t.mark == Mark::Atomic].bad[t.mark != Mark::Atomic] { (t.mark.symbol()) }
                        td.num { (t.violations) "/" (t.intervals) }
                        td.num { (format!("{:.1}", t.seconds)) }
                        td { @if let Some(s) = &t.signature { code { (s) } } }
                    }
                }
            }
        }
        @if !runs.is_empty() {
            h2 { "Failing tests" }
            @for (test, run) in &runs {
                section {
                    details id=(format!("run-{}", test.test)) {
                        summary { strong { (test.test) } " " span.bad { (test.mark.symbol()) " "
                            (test.mark.meaning()) } }
                        @if let Some(error) = &test.error { pre { (error) } }
                        @match run {
                            Some(run) => (run),
                            None => p { "Its run directory is not here (a merged campaign's
                                runs stay in the shards' directories: give them to
                                `persim campaign merge --html`)." },
                        }
                    }
                }
            }
        }
        script { (PreEscaped(FILTER_SCRIPT)) }
    };
    Ok(page(&title, body))
}

/// The page of a fault campaign: the summary table, its plot, and each finding.
pub fn faults_page(report: &FaultsReport) -> Result<String> {
    let svg = fault_summary_svg(&report.summary).map_err(anyhow::Error::msg)?;
    let findings: Vec<_> = report.findings().collect();
    let outcomes: Vec<FaultOutcome> = FaultOutcome::iter().collect();
    let body = html! {
        h1 { "Faults in " (report.run.display()) }
        p.meta { (report.faults.len()) " faults, seed " (report.seed) ": "
            span class=(verdict_class(!findings.is_empty())) {
                (findings.len()) " finding(s) (silent or crash)" } }
        table.summary {
            tr { th { "kind" } th { "where" } th { "faults" }
                 @for o in &outcomes { th { (o) } } th { "bytes at risk" } }
            @for row in &report.summary.rows {
                tr {
                    td { (row.kind) } td { (row.place) } td.num { (row.faults) }
                    @for o in &outcomes {
                        td.num.bad[o.is_finding() && row.share(*o) > 0.0] {
                            (format!("{:.0}%", 100.0 * row.share(*o)))
                        }
                    }
                    td.num { (format!("{:.1}", row.bytes_at_risk)) }
                }
            }
        }
        figure { (PreEscaped(svg)) }
        @if !findings.is_empty() {
            h2 { "Findings" }
            @for f in &findings {
                @let range = f.fault.range(u64::MAX);
                h3 { span.bad { (f.outcome) } " in " (f.image) " (" (f.place) "): "
                     (f.fault.kind) " at PM " (format!("{:#x}..{:#x}", range.start, range.end)) }
                p { "last written by: " code { (f.writer.as_deref().unwrap_or("(no store of the test)")) } }
                @if !f.detail.is_empty() { (diff_block(&f.detail)) }
            }
        }
    };
    Ok(page(
        &format!("persim faults: {}", report.run.display()),
        body,
    ))
}

/// The page of a measurement (`persim profile`, `persim efficiency run`): its text table
/// and its SVG plots inline.
pub fn plots_page(title: &str, text: &str, svgs: &[(&str, String)]) -> String {
    let body = html! {
        h1 { (title) }
        pre { (text) }
        @for (name, svg) in svgs {
            figure { (PreEscaped(svg)) figcaption { (name) } }
        }
    };
    page(title, body)
}

/// Writes `page` to `file` whole or not at all, and says where.
pub fn write(file: &Path, page: &str) -> Result<()> {
    persim_trace::atomic_file::write_atomically(file, page.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    say!("report: {}", file.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_lines_middle_is_marked_and_its_long_ends_cut() {
        let (old, new) = ("- \"a\": \"xéy\",", "+ \"a\": \"xöõy\",");
        let ((s0, e0), (s1, e1)) = differing_middles(old, new);
        assert_eq!((&old[s0..e0], &new[s1..e1]), ("é", "öõ"));
        // equal but for the column: nothing between
        let ((s0, e0), _) = differing_middles("- same", "+ same");
        assert_eq!(s0, e0);
        let long = format!("- {}", "a".repeat(LONG));
        assert_eq!(
            cut_start(&long[..LONG]),
            &long[..LONG],
            "a field's line is whole"
        );
        let cut = cut_start(&long);
        assert_eq!(cut, format!("- …{}", "a".repeat(CONTEXT_CHARS)));
        assert_eq!(
            cut_end(&"b".repeat(LONG + 1)),
            format!("{}…", "b".repeat(CONTEXT_CHARS))
        );
        assert_eq!(cut_end("short"), "short");
        let diff = format!(
            "  x\n- {}1{}\n+ {}2{}\n",
            "a".repeat(LONG),
            "z".repeat(LONG),
            "a".repeat(LONG),
            "z".repeat(LONG)
        );
        let html = diff_block(&diff).into_string();
        assert!(
            html.contains("<mark>1</mark>") && html.contains("<mark>2</mark>"),
            "{html}"
        );
        assert!(!html.contains(&"a".repeat(CONTEXT_CHARS + 1)), "{html}");
    }
}
