//! Every test of a suite or a generated directory, each as one run into DIR/<test>: on a
//! shared guest (booted once), several tests at once, a deterministic shard of them, and
//! the failing tests grouped by signature. A run directory resumes where it stopped, so a
//! killed campaign started again redoes only what was not finished.

use crate::cases::{Suite, TestCase};
use crate::guest::Guest;
use crate::options::PipelineOptions;
use crate::progress::Observer;
use crate::rundir::RunDir;
use crate::stages::run_test;
use anyhow::{bail, Context, Result};
use persim_analyze::{signature, without_numbers, Mark, Timings};
use persim_model::{CacheMode, Strategy};
use persim_state::Recovered;
use persim_trace::atomic_file::write_atomically;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `results.json` of a suite or campaign.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteResults {
    pub suite: String,
    /// Run as a campaign (`persim campaign run`) rather than as a suite (`persim suite`):
    /// what the table's heading calls it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub campaign: bool,
    pub fs: String,
    pub cache: CacheMode,
    pub strategy: Strategy,
    /// `--reference`: the configuration whose final states every test's were compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The shards these results hold (several once merged); empty: every test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<Shard>,
    /// By name.
    pub tests: Vec<TestResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub test: String,
    pub mark: Mark,
    pub violations: usize,
    pub intervals: usize,
    pub seconds: f64,
    /// Why the test could not be run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What tells its problem apart (`persim_analyze::signature`); None when atomic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Seconds per stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

/// Part K of N of a campaign (`--shard K/N`): the tests at positions K-1, K-1+N, … of the
/// sorted test names. Shards of one N are disjoint and together hold every test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    pub fn holds(self, position: usize) -> bool {
        position % self.count == self.index - 1
    }
}

impl Shard {
    /// The part a cluster scheduler gave this process (`--shard auto`), from its
    /// environment (`var`): a Slurm job array's task (`SLURM_ARRAY_TASK_ID` among
    /// `SLURM_ARRAY_TASK_MIN`..`MAX` by `STEP`, `SLURM_ARRAY_TASK_COUNT` tasks), or a
    /// Kubernetes Indexed Job's pod (`JOB_COMPLETION_INDEX` from 0, of `count` completions,
    /// which the Job does not tell its pods). `count`, when given, must agree with Slurm's.
    pub fn from_scheduler(
        count: Option<usize>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Shard, String> {
        let number = |name: &str| -> Result<Option<usize>, String> {
            var(name)
                .map(|v| (v.trim().parse()).map_err(|_| format!("{name}={v} is not a number")))
                .transpose()
        };
        let shard = if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let (Some(min), Some(max), Some(tasks)) = (
                number("SLURM_ARRAY_TASK_MIN")?,
                number("SLURM_ARRAY_TASK_MAX")?,
                number("SLURM_ARRAY_TASK_COUNT")?,
            ) else {
                return Err("SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_MIN, \
                     _MAX and _COUNT: is this Slurm older than 18.08?"
                    .into());
            };
            let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            if (max - min) / step + 1 != tasks || id < min || (id - min) % step != 0 {
                return Err(format!(
                    "the job array's tasks are not evenly spaced ({tasks} tasks from {min} \
                     to {max}, this one {id}): give --array as a range such as 1-{tasks}"
                ));
            }
            if count.is_some_and(|n| n != tasks) {
                return Err(format!(
                    "--shard auto/{} but the job array has {tasks} tasks",
                    count.unwrap_or(0)
                ));
            }
            Shard {
                index: (id - min) / step + 1,
                count: tasks,
            }
        } else if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let Some(count) = count else {
                return Err(
                    "JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job), but a \
                     pod is not told the Job's completions: give --shard auto/N with N \
                     the Job's completions"
                        .into(),
                );
            };
            Shard {
                index: index + 1,
                count,
            }
        } else {
            return Err("--shard auto: this is no task of a Slurm job array \
                 (SLURM_ARRAY_TASK_ID) nor a pod of a Kubernetes Indexed Job \
                 (JOB_COMPLETION_INDEX): run it as one, or give --shard K/N"
                .into());
        };
        if shard.index > shard.count || shard.count == 0 {
            return Err(format!(
                "this task is part {} of {}: is the count right?",
                shard.index, shard.count
            ));
        }
        Ok(shard)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let parsed = text
            .split_once('/')
            .and_then(|(k, n)| Some((k.parse().ok()?, n.parse().ok()?)));
        match parsed {
            Some((index, count)) if 1 <= index && index <= count => Ok(Shard { index, count }),
            _ => Err(format!(
                "`{text}` is not a shard: give K/N with 1 <= K <= N, e.g. 2/8"
            )),
        }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// How a campaign runs beside the pipeline's options.
#[derive(Clone, Copy, Debug)]
pub struct CampaignOptions {
    /// Tests run at once (each traced in a VM of its own; the extraction guests are
    /// shared). While one test's images are recovered, the next is traced.
    pub parallel: usize,
    pub shard: Shard,
    /// A campaign (`persim campaign run`) rather than a suite (`persim suite`).
    pub campaign: bool,
}

impl Default for CampaignOptions {
    fn default() -> Self {
        CampaignOptions {
            parallel: 1,
            shard: Shard::WHOLE,
            campaign: false,
        }
    }
}

/// What a campaign reports as it goes.
#[derive(Debug)]
pub enum TestEvent<'a> {
    Started {
        name: &'a str,
        position: usize,
        total: usize,
    },
    Finished {
        result: &'a TestResult,
        done: usize,
        total: usize,
        /// Tests with violations or errors so far.
        failing: usize,
        /// At the mean pace so far.
        left: Duration,
    },
}

/// Runs the campaign's tests of `suite` into `out/<test>` and writes results.json and
/// results.txt into `out`, which it holds locked throughout (another campaign on it is
/// refused). With one test at a time, the stages' progress goes to `observer`; `report`
/// hears of every test started and finished.
pub fn run_campaign(
    opts: &PipelineOptions,
    guest: &(dyn Guest + Sync),
    suite: &Suite,
    out: &Path,
    campaign: CampaignOptions,
    mut report: impl FnMut(&TestEvent),
    observer: &mut dyn Observer,
) -> Result<SuiteResults> {
    let _locked = RunDir::create(out)?;
    let tests: Vec<(String, std::path::PathBuf)> = suite
        .tests()?
        .into_iter()
        .enumerate()
        .filter(|(i, _)| campaign.shard.holds(*i))
        .map(|(_, t)| t)
        .collect();
    let total = tests.len();
    let started = Instant::now();
    let mut results: Vec<TestResult> = Vec::with_capacity(total);
    let finished =
        |result: TestResult, results: &mut Vec<TestResult>, report: &mut dyn FnMut(&TestEvent)| {
            results.push(result);
            let done = results.len();
            let failing = results.iter().filter(|t| t.mark != Mark::Atomic).count();
            let left = started
                .elapsed()
                .mul_f64((total - done) as f64 / done as f64);
            report(&TestEvent::Finished {
                result: results.last().expect("just pushed"),
                done,
                total,
                failing,
                left,
            });
        };
    if campaign.parallel <= 1 {
        for (position, (name, path)) in tests.iter().enumerate() {
            report(&TestEvent::Started {
                name,
                position,
                total,
            });
            let result = run_one(opts, guest, name, path, out, observer);
            finished(result, &mut results, &mut report);
        }
    } else {
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel();
            for _ in 0..campaign.parallel.min(total) {
                let (tx, next, tests) = (tx.clone(), &next, &tests);
                scope.spawn(move || loop {
                    let position = next.fetch_add(1, Ordering::Relaxed);
                    let Some((name, path)) = tests.get(position) else {
                        return;
                    };
                    let _ = tx.send(Err(position));
                    let result = run_one(opts, guest, name, path, out, &mut ());
                    let _ = tx.send(Ok(result));
                });
            }
            drop(tx);
            for message in rx {
                match message {
                    Err(position) => report(&TestEvent::Started {
                        name: &tests[position].0,
                        position,
                        total,
                    }),
                    Ok(result) => finished(result, &mut results, &mut report),
                }
            }
        });
    }
    results.sort_by(|a, b| a.test.cmp(&b.test));
    let results = SuiteResults {
        suite: suite.name.clone(),
        campaign: campaign.campaign,
        fs: guest.name().to_string(),
        cache: opts.cache,
        strategy: opts.strategy,
        reference: guest.reference().map(|r| r.name().to_owned()),
        shards: if campaign.shard == Shard::WHOLE {
            Vec::new()
        } else {
            vec![campaign.shard]
        },
        tests: results,
    };
    results.save(out)?;
    Ok(results)
}

/// One test into `out/<name>`, its failure to run a result too.
fn run_one(
    opts: &PipelineOptions,
    guest: &dyn Guest,
    name: &str,
    path: &Path,
    out: &Path,
    observer: &mut dyn Observer,
) -> TestResult {
    let started = Instant::now();
    let outcome = TestCase::load(path).and_then(|test| {
        let dir = RunDir::create(out.join(name))?;
        let report = run_test(opts, guest, name, &test, &dir, observer)?;
        Ok((report, dir))
    });
    let seconds = started.elapsed().as_secs_f64();
    match outcome {
        Ok((report, dir)) => TestResult {
            test: name.to_owned(),
            mark: report.mark(),
            violations: report.violations(),
            intervals: report.checkpoints.len(),
            seconds,
            error: None,
            signature: signature(&report, |image| saved_state(&dir, image)),
            timings: Some(report.timings),
        },
        Err(e) => {
            let error = format!("{e:#}");
            TestResult {
                test: name.to_owned(),
                mark: Mark::NotRun,
                violations: 0,
                intervals: 0,
                seconds,
                signature: Some(format!(
                    "{} {}",
                    Mark::NotRun.symbol(),
                    without_numbers(error.lines().next().unwrap_or("")).replace(name, "<test>")
                )),
                error: Some(error),
                timings: None,
            }
        }
    }
}

fn saved_state(dir: &RunDir, image: &str) -> Option<Recovered> {
    serde_json::from_slice(&std::fs::read(dir.state(image)).ok()?).ok()
}

/// Combines the results of a campaign's shards (`persim campaign merge`): same suite,
/// machine and options, shards of one count and none twice.
pub fn merge(parts: Vec<SuiteResults>) -> Result<SuiteResults> {
    let Some(first) = parts.first() else {
        bail!("nothing to merge: give the results of each shard");
    };
    let mut merged = SuiteResults {
        shards: Vec::new(),
        tests: Vec::new(),
        ..first.clone()
    };
    for part in &parts {
        let what = |r: &SuiteResults| {
            let reference = match &r.reference {
                Some(reference) => format!(", reference {reference}"),
                None => String::new(),
            };
            format!(
                "{} on {} ({}, {}{reference})",
                r.suite, r.fs, r.cache, r.strategy
            )
        };
        if what(part) != what(first) {
            bail!(
                "shards of different campaigns: {} and {}",
                what(first),
                what(part)
            );
        }
        let shards = if part.shards.is_empty() {
            vec![Shard::WHOLE]
        } else {
            part.shards.clone()
        };
        for shard in shards {
            if merged.shards.contains(&shard) {
                bail!("shard {shard} is given twice");
            }
            if merged
                .shards
                .first()
                .is_some_and(|s| s.count != shard.count)
            {
                bail!(
                    "shard {shard} is of another split than {}",
                    merged.shards[0]
                );
            }
            merged.shards.push(shard);
        }
        merged.tests.extend(part.tests.iter().cloned());
    }
    merged.shards.sort();
    if merged.shards.len() == merged.shards[0].count {
        merged.shards.clear(); // every shard: the whole campaign
    }
    merged.tests.sort_by(|a, b| a.test.cmp(&b.test));
    Ok(merged)
}

/// Failing tests with one signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group<'a> {
    pub signature: &'a str,
    pub tests: Vec<&'a str>,
}

impl SuiteResults {
    /// Whether any test found violations or could not be run.
    pub fn failed(&self) -> bool {
        self.tests.iter().any(|t| t.mark != Mark::Atomic)
    }

    /// The failing tests by signature, the largest group first.
    pub fn groups(&self) -> Vec<Group<'_>> {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for test in &self.tests {
            if let Some(signature) = &test.signature {
                groups.entry(signature).or_default().push(&test.test);
            }
        }
        let mut groups: Vec<Group> = groups
            .into_iter()
            .map(|(signature, tests)| Group { signature, tests })
            .collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.tests.len()));
        groups
    }

    /// `dir/results.json`, where a campaign's results are.
    pub fn file(dir: &Path) -> std::path::PathBuf {
        dir.join("results.json")
    }

    /// Reads `dir/results.json`.
    pub fn load(dir: &Path) -> Result<SuiteResults> {
        let path = SuiteResults::file(dir);
        let text =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_slice(&text).with_context(|| format!("{} is malformed", path.display()))
    }

    /// Writes results.json and results.txt into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_atomically(
            &SuiteResults::file(dir),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )?;
        write_atomically(&dir.join("results.txt"), self.to_text().as_bytes())?;
        Ok(())
    }

    /// `results.txt`: one line per test, then the failing tests grouped by signature.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let shards: Vec<String> = self.shards.iter().map(Shard::to_string).collect();
        let _ = writeln!(
            t,
            "{} {} on {}{} (cache {}, strategy {}){}",
            if self.campaign { "campaign" } else { "suite" },
            self.suite,
            self.fs,
            self.reference
                .as_ref()
                .map_or(String::new(), |r| format!(" against reference {r}")),
            self.cache,
            self.strategy,
            if shards.is_empty() {
                String::new()
            } else {
                format!(", shards {}", shards.join(" "))
            }
        );
        let width = self.tests.iter().map(|t| t.test.len()).fold(20, usize::max);
        let _ = writeln!(
            t,
            "{:<width$} {:>6} {:>10} {:>9}",
            "test", "result", "violations", "seconds"
        );
        for test in &self.tests {
            let _ = writeln!(
                t,
                "{:<width$} {:>6} {:>10} {:>9.1}{}",
                test.test,
                test.mark.symbol(),
                format!("{}/{}", test.violations, test.intervals),
                test.seconds,
                test.error.as_ref().map_or(String::new(), |e| format!(
                    "  {}",
                    e.lines().next().unwrap_or("")
                ))
            );
        }
        let groups = self.groups();
        if !groups.is_empty() {
            let failing: usize = groups.iter().map(|g| g.tests.len()).sum();
            let _ = writeln!(
                t,
                "\n{failing} of {} tests failed, {} distinct problem(s):",
                self.tests.len(),
                groups.len()
            );
            for group in groups {
                let shown: Vec<&str> = group.tests.iter().take(3).copied().collect();
                let more = group.tests.len() - shown.len();
                let _ = writeln!(
                    t,
                    "  {:>4} × {}\n         e.g. {}{}",
                    group.tests.len(),
                    group.signature,
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::Shard;

    fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            (vars.iter())
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn slurm(id: &str, min: &str, max: &str, count: &str) -> Vec<(&'static str, String)> {
        [
            ("SLURM_ARRAY_TASK_ID", id),
            ("SLURM_ARRAY_TASK_MIN", min),
            ("SLURM_ARRAY_TASK_MAX", max),
            ("SLURM_ARRAY_TASK_COUNT", count),
        ]
        .map(|(n, v)| (n, v.to_owned()))
        .into()
    }

    fn auto(count: Option<usize>, vars: &[(&'static str, String)]) -> Result<Shard, String> {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
        Shard::from_scheduler(count, env(&vars))
    }

    #[test]
    fn a_slurm_array_task_or_an_indexed_pod_is_its_shard() {
        let shard = |index, count| Ok(Shard { index, count });
        // --array=0-3 and --array=1-4: the same four parts
        assert_eq!(auto(None, &slurm("0", "0", "3", "4")), shard(1, 4));
        assert_eq!(auto(None, &slurm("4", "1", "4", "4")), shard(4, 4));
        assert_eq!(auto(Some(4), &slurm("2", "1", "4", "4")), shard(2, 4));
        // --array=0-6:2 (0, 2, 4, 6)
        let mut stepped = slurm("4", "0", "6", "4");
        stepped.push(("SLURM_ARRAY_TASK_STEP", "2".into()));
        assert_eq!(auto(None, &stepped), shard(3, 4));
        let k8s = [("JOB_COMPLETION_INDEX", "0".to_owned())];
        assert_eq!(auto(Some(8), &k8s), shard(1, 8));
        let k8s = [("JOB_COMPLETION_INDEX", "7".to_owned())];
        assert_eq!(auto(Some(8), &k8s), shard(8, 8));

        let refused = |count, vars: &[(&'static str, String)], words: &str| {
            let e = auto(count, vars).unwrap_err();
            assert!(e.contains(words), "{e}");
        };
        refused(None, &[], "no task of a Slurm job array");
        refused(None, &k8s, "give --shard auto/N");
        refused(
            Some(4),
            &[("JOB_COMPLETION_INDEX", "4".into())],
            "part 5 of 4",
        );
        refused(
            Some(3),
            &slurm("1", "1", "4", "4"),
            "auto/3 but the job array has 4",
        );
        // --array=1,2,7: not a range
        refused(None, &slurm("7", "1", "7", "3"), "not evenly spaced");
        refused(
            None,
            &slurm("x", "1", "7", "3"),
            "SLURM_ARRAY_TASK_ID=x is not a number",
        );
        refused(
            None,
            &slurm("1", "1", "4", "4")[..1],
            "not SLURM_ARRAY_TASK_MIN",
        );
    }

    /// results.json must load as the numbers it was written with (a resumed or merged
    /// campaign compares them): serde_json's default float parser is off by one unit in
    /// the last place for some of the seconds a campaign measures.
    #[test]
    fn seconds_survive_results_json_exactly() {
        let off: Vec<f64> = (0..200_000u64)
            .map(|n| std::time::Duration::from_nanos(1_647_000_000 + n * 7919).as_secs_f64())
            .filter(|&s| {
                let text = serde_json::to_string(&s).unwrap();
                serde_json::from_str::<f64>(&text).unwrap() != s
            })
            .collect();
        assert!(
            off.is_empty(),
            "{} of them, e.g. {:?}",
            off.len(),
            &off[..1]
        );
    }
}
