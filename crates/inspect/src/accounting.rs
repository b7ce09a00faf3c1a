//! Exact PM accounting (`persim profile --by process|function`): a trace's stores,
//! flushes, fences and reads split by the process (and thread) that made them, from the
//! thread switches the tracer records (docs/reference/trace-format.md), or by the function of the
//! instruction; and the PEBS estimator run on the same pass (`crate::pebs`). Definitions
//! in docs/design/analysis.md.

use crate::pebs::{Estimate, Sampler};
use crate::profile::code_name;
use persim_trace::{Entry, FenceKind, Op, Symbols, TraceError};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::borrow::Borrow;
use std::fmt::Write as _;

/// What the figures are split by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Process,
    Function,
}

/// Entries per bucket of the bytes-over-the-trace series as it is recorded.
const BUCKET_SHIFT: u32 = 10;
/// Points of the series shown and saved: buckets are merged down to at most this many.
pub const WINDOWS: usize = 40;

/// The counts of one process, thread or function.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    pub stores: u64,
    pub bytes_cached: u64,
    pub bytes_nt: u64,
    pub flushes: u64,
    pub fences: u64,
    pub reads: u64,
    pub bytes_read: u64,
    /// Bytes stored in each window of entries ([`Accounting::window`] entries each).
    pub bytes_over_trace: Vec<u64>,
}

impl Counts {
    pub fn bytes(&self) -> u64 {
        self.bytes_cached + self.bytes_nt
    }

    fn is_empty(&self) -> bool {
        self.stores + self.flushes + self.fences + self.reads == 0
    }

    fn step(&mut self, entry: &Entry, index: u64) {
        match &entry.op {
            Op::Write { data, nt, .. } => {
                let len = data.len() as u64;
                self.stores += 1;
                if *nt {
                    self.bytes_nt += len;
                } else {
                    self.bytes_cached += len;
                }
                let bucket = (index >> BUCKET_SHIFT) as usize;
                if bucket >= self.bytes_over_trace.len() {
                    self.bytes_over_trace.resize(bucket + 1, 0);
                }
                self.bytes_over_trace[bucket] += len;
            }
            Op::Read { size, .. } => {
                self.reads += 1;
                self.bytes_read += size;
            }
            Op::Flush { .. } => self.flushes += 1,
            // An interrupt's drain is no fence of the program (docs/design/model.md).
            Op::Fence(FenceKind::Interrupt) => {}
            Op::Fence(_) => self.fences += 1,
            _ => {}
        }
    }

    fn add(&mut self, other: &Counts) {
        self.stores += other.stores;
        self.bytes_cached += other.bytes_cached;
        self.bytes_nt += other.bytes_nt;
        self.flushes += other.flushes;
        self.fences += other.fences;
        self.reads += other.reads;
        self.bytes_read += other.bytes_read;
        if self.bytes_over_trace.len() < other.bytes_over_trace.len() {
            self.bytes_over_trace
                .resize(other.bytes_over_trace.len(), 0);
        }
        for (a, b) in self
            .bytes_over_trace
            .iter_mut()
            .zip(&other.bytes_over_trace)
        {
            *a += b;
        }
    }

    /// Buckets of `1 << BUCKET_SHIFT` entries merged `factor` at a time, padded to `len`.
    fn merge_buckets(&mut self, factor: usize, len: usize) {
        let mut merged: Vec<u64> = self
            .bytes_over_trace
            .chunks(factor)
            .map(|c| c.iter().sum())
            .collect();
        merged.resize(len, 0);
        self.bytes_over_trace = merged;
    }
}

/// One row: a process (with its threads), a thread, or a function.
#[derive(Clone, Debug, Serialize)]
pub struct Group {
    /// The process's or thread's name (its last `comm`), or the function.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
    #[serde(flatten)]
    pub counts: Counts,
    /// A process's threads, when it has more than one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<Group>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Accounting {
    pub entries: u64,
    /// Whether the trace records threads (the header's flag, or an entry names one);
    /// without, every entry is the unknown process's.
    pub threads_recorded: bool,
    /// Entries per window of `bytes_over_trace`.
    pub window: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<By>,
    /// Most bytes first.
    pub groups: Vec<Group>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
}

/// A thread seen in the trace; index 0 is the unknown one (entries before the first
/// thread switch, or all of a trace without threads).
struct Thread {
    pid: Option<u32>,
    tid: Option<u32>,
    comm: String,
}

/// Splits a trace by `by` and, with `sample_interval`, runs the PEBS estimator on it, in
/// one pass. `threads_recorded` is the header's flag; `symbols` name the functions.
pub fn account<E: Borrow<Entry>>(
    entries: impl IntoIterator<Item = Result<E, TraceError>>,
    threads_recorded: bool,
    by: Option<By>,
    sample_interval: Option<u64>,
    symbols: Option<&Symbols>,
) -> Result<Accounting, TraceError> {
    let mut threads = vec![Thread {
        pid: None,
        tid: None,
        comm: "unknown".into(),
    }];
    let mut thread_index: FxHashMap<(u32, u32), usize> = FxHashMap::default();
    let mut current = 0;
    // Per thread (by process), or per function (its index in `functions`).
    let mut counts: Vec<Counts> = vec![Counts::default()];
    let mut functions = Functions::new(symbols);
    let mut sampler = sample_interval.map(Sampler::new);
    let mut index = 0u64;
    for entry in entries {
        let entry = entry?;
        let entry = entry.borrow();
        if let Some(task) = &entry.meta.task {
            current = *thread_index.entry((task.pid, task.tid)).or_insert_with(|| {
                threads.push(Thread {
                    pid: Some(task.pid),
                    tid: Some(task.tid),
                    comm: String::new(),
                });
                if by == Some(By::Process) {
                    counts.push(Counts::default());
                }
                threads.len() - 1
            });
            if threads[current].comm != task.comm {
                threads[current].comm.clone_from(&task.comm);
            }
        }
        match by {
            Some(By::Process) => counts[current].step(entry, index),
            Some(By::Function) => {
                let f = functions.index(entry.meta.pc);
                if f >= counts.len() {
                    counts.resize(f + 1, Counts::default());
                }
                counts[f].step(entry, index);
            }
            None => {}
        }
        if let (Some(s), Op::Write { data, .. }) = (&mut sampler, &entry.op) {
            s.store(current, data.len() as u64);
        }
        index += 1;
    }
    let buckets = (index.div_ceil(1 << BUCKET_SHIFT) as usize).max(1);
    let factor = buckets.div_ceil(WINDOWS);
    let windows = buckets.div_ceil(factor);
    for c in &mut counts {
        c.merge_buckets(factor, windows);
    }
    let mut groups = match by {
        Some(By::Process) => by_process(&threads, counts),
        Some(By::Function) => functions
            .names
            .into_iter()
            .zip(counts)
            .map(|(name, counts)| Group {
                name,
                pid: None,
                tid: None,
                counts,
                threads: Vec::new(),
            })
            .collect(),
        None => Vec::new(),
    };
    groups.retain(|g| !g.counts.is_empty());
    sort(&mut groups);
    let estimate = sampler.map(|s| {
        let process = |t: usize| match threads[t].pid {
            Some(pid) => format!("{} ({pid})", process_name(&threads, pid)),
            None => threads[t].comm.clone(),
        };
        s.finish(process)
    });
    Ok(Accounting {
        entries: index,
        threads_recorded: threads_recorded || threads.len() > 1,
        window: (factor as u64) << BUCKET_SHIFT,
        by,
        groups,
        estimate,
    })
}

/// Most bytes first, then most flushes and fences, then by name.
fn sort(groups: &mut [Group]) {
    groups.sort_by(|a, b| {
        let key = |g: &Group| (g.counts.bytes(), g.counts.flushes + g.counts.fences);
        key(b).cmp(&key(a)).then_with(|| a.name.cmp(&b.name))
    });
}

/// A process is named by its main thread (tid = pid) if it ran, else by a thread of it.
fn process_name(threads: &[Thread], pid: u32) -> &str {
    threads
        .iter()
        .filter(|t| t.pid == Some(pid))
        .max_by_key(|t| t.tid == Some(pid))
        .map_or("", |t| t.comm.as_str())
}

/// Threads' counts summed per process, each thread a row of its process if it has more
/// than one that did something.
fn by_process(threads: &[Thread], counts: Vec<Counts>) -> Vec<Group> {
    let mut processes: Vec<Group> = Vec::new();
    let mut process_index: FxHashMap<Option<u32>, usize> = FxHashMap::default();
    for (thread, counts) in threads.iter().zip(counts) {
        if counts.is_empty() {
            continue;
        }
        let p = *process_index.entry(thread.pid).or_insert_with(|| {
            processes.push(Group {
                name: match thread.pid {
                    Some(pid) => process_name(threads, pid).to_owned(),
                    None => thread.comm.clone(),
                },
                pid: thread.pid,
                tid: None,
                counts: Counts::default(),
                threads: Vec::new(),
            });
            processes.len() - 1
        });
        processes[p].counts.add(&counts);
        processes[p].threads.push(Group {
            name: thread.comm.clone(),
            pid: thread.pid,
            tid: thread.tid,
            counts,
            threads: Vec::new(),
        });
    }
    for p in &mut processes {
        if p.threads.len() == 1 {
            p.threads.clear();
        }
        sort(&mut p.threads);
    }
    processes
}

/// Functions by the pcs of entries, each pc resolved once.
struct Functions<'a> {
    symbols: Option<&'a Symbols>,
    names: Vec<String>,
    by_name: FxHashMap<String, usize>,
    by_pc: FxHashMap<u64, usize>,
}

impl<'a> Functions<'a> {
    fn new(symbols: Option<&'a Symbols>) -> Self {
        Functions {
            symbols,
            names: vec!["unknown".into()],
            by_name: FxHashMap::default(),
            by_pc: FxHashMap::default(),
        }
    }

    /// The function of `pc` (index 0 without a pc).
    fn index(&mut self, pc: Option<u64>) -> usize {
        let Some(pc) = pc else { return 0 };
        if let Some(&i) = self.by_pc.get(&pc) {
            return i;
        }
        let name = code_name(self.symbols, pc);
        let next = self.names.len();
        let i = *self.by_name.entry(name.clone()).or_insert(next);
        if i == next {
            self.names.push(name);
        }
        self.by_pc.insert(pc, i);
        i
    }
}

/// Rows shown in the text per table; `--json` has them all.
const SHOWN: usize = 20;

impl Accounting {
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        if self.by == Some(By::Process) && !self.threads_recorded {
            let _ = writeln!(
                t,
                "this trace records no threads (traced by an older Persim, or the guest kernel's \
                 running task was not found: see the tracer's messages); all is `unknown`\n"
            );
        }
        if let Some(by) = self.by {
            self.groups_text(&mut t, by);
        }
        if let Some(estimate) = &self.estimate {
            if self.by.is_some() {
                t.push('\n');
            }
            t.push_str(&estimate.to_text());
        }
        t
    }

    fn groups_text(&self, t: &mut String, by: By) {
        let total: u64 = self.groups.iter().map(|g| g.counts.bytes()).sum();
        let first = match by {
            By::Process => "process (pid) / thread (tid)",
            By::Function => "function",
        };
        let header = [
            first, "bytes", "share", "NT", "stores", "flushes", "fences", "reads",
        ];
        let mut rows = vec![header.map(str::to_owned).to_vec()];
        let mut sparks = vec![format!(
            "bytes over the trace ({} entries each)",
            self.window
        )];
        let row = |name: String, c: &Counts| {
            let pct = |a: u64, b: u64| {
                if b == 0 {
                    "-".to_owned()
                } else {
                    format!("{:.1} %", a as f64 * 100.0 / b as f64)
                }
            };
            vec![
                name,
                c.bytes().to_string(),
                pct(c.bytes(), total),
                pct(c.bytes_nt, c.bytes()),
                c.stores.to_string(),
                c.flushes.to_string(),
                c.fences.to_string(),
                c.reads.to_string(),
            ]
        };
        for g in self.groups.iter().take(SHOWN) {
            let name = match g.pid {
                Some(pid) => format!("{} ({pid})", g.name),
                None => g.name.clone(),
            };
            rows.push(row(name, &g.counts));
            sparks.push(sparkline(&g.counts.bytes_over_trace));
            for th in &g.threads {
                let name = format!("  {} ({})", th.name, th.tid.unwrap_or_default());
                rows.push(row(name, &th.counts));
                sparks.push(sparkline(&th.counts.bytes_over_trace));
            }
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for (r, spark) in rows.iter().zip(&sparks) {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (cell, w))| match c {
                    0 => format!("{cell:<w$}"),
                    _ => format!("{cell:>w$}"),
                })
                .collect();
            let _ = writeln!(t, "{}  {spark}", cells.join("  "));
        }
        if self.groups.len() > SHOWN {
            let _ = writeln!(
                t,
                "and {} more (--json lists them)",
                self.groups.len() - SHOWN
            );
        }
    }
}

/// Each window's bytes as a bar of eight heights, relative to the row's largest window;
/// a window without bytes is a blank.
fn sparkline(windows: &[u64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = windows.iter().copied().max().unwrap_or(0).max(1);
    windows
        .iter()
        .map(|&b| match b {
            0 => ' ',
            b => BARS[((b - 1) * 8 / max) as usize],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_trace::{FenceKind, FlushKind, Meta, Task};

    fn switch(pid: u32, tid: u32, comm: &str, op: Op) -> Entry {
        Entry {
            op,
            meta: Meta {
                task: Some(Task {
                    pid,
                    tid,
                    comm: comm.into(),
                }),
                ..Meta::default()
            },
        }
    }

    fn write(len: usize, nt: bool) -> Op {
        Op::Write {
            addr: 0,
            data: vec![0; len],
            nt,
        }
    }

    /// Two processes, one with two threads, and a rename by exec.
    fn trace() -> Vec<Entry> {
        vec![
            Entry::from(write(8, false)),
            switch(10, 10, "sh", write(16, false)),
            switch(20, 20, "writer", write(64, true)),
            Entry::from(write(64, true)),
            Entry::from(Op::Fence(FenceKind::Sfence)),
            switch(20, 21, "writer-2", write(32, false)),
            Entry::from(Op::Flush {
                kind: FlushKind::Clwb,
                addr: 0,
            }),
            switch(10, 10, "fs-ops", write(4, false)),
            Entry::from(Op::Read { addr: 0, size: 8 }),
        ]
    }

    fn by(by: By) -> Accounting {
        account(trace().into_iter().map(Ok), true, Some(by), None, None).unwrap()
    }

    #[test]
    fn bytes_flushes_fences_and_reads_go_to_the_thread_that_ran() {
        let a = by(By::Process);
        let rows: Vec<(&str, Option<u32>, [u64; 5])> = a
            .groups
            .iter()
            .map(|g| {
                let c = &g.counts;
                let counts = [c.bytes_cached, c.bytes_nt, c.flushes, c.fences, c.reads];
                (g.name.as_str(), g.pid, counts)
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("writer", Some(20), [32, 128, 1, 1, 0]),
                // Named by its last name (exec renamed it).
                ("fs-ops", Some(10), [20, 0, 0, 0, 1]),
                ("unknown", None, [8, 0, 0, 0, 0]),
            ]
        );
        let threads: Vec<(Option<u32>, &str, u64)> = a.groups[0]
            .threads
            .iter()
            .map(|t| (t.tid, t.name.as_str(), t.counts.bytes()))
            .collect();
        assert_eq!(
            threads,
            [(Some(20), "writer", 128), (Some(21), "writer-2", 32)]
        );
        assert!(a.groups[1].threads.is_empty(), "one thread: no thread rows");
        let text = a.to_text();
        assert!(text.contains("writer (20)"), "{text}");
        assert!(text.contains("  writer-2 (21)"), "{text}");
    }

    #[test]
    fn by_function_without_symbols_groups_by_pc() {
        let mut entries = trace();
        entries[2].meta.pc = Some(0x1000);
        entries[3].meta.pc = Some(0x1000);
        entries[5].meta.pc = Some(0x2000);
        let a = account(
            entries.into_iter().map(Ok),
            true,
            Some(By::Function),
            None,
            None,
        )
        .unwrap();
        let rows: Vec<(&str, u64)> = a
            .groups
            .iter()
            .map(|g| (g.name.as_str(), g.counts.bytes()))
            .collect();
        assert_eq!(rows, [("0x1000", 128), ("0x2000", 32), ("unknown", 28)]);
    }

    #[test]
    fn bytes_over_the_trace_are_in_windows_of_entries() {
        // 3 windows' worth of buckets: one process writes early, the other late.
        let n = 3 << BUCKET_SHIFT;
        let entries = (0..n).map(|i| {
            let op = write(8, false);
            Ok::<_, TraceError>(match i {
                0 => switch(1, 1, "early", op),
                i if i == n / 2 => switch(2, 2, "late", op),
                _ => Entry::from(op),
            })
        });
        let a = account(entries, true, Some(By::Process), None, None).unwrap();
        assert_eq!(a.window, 1 << BUCKET_SHIFT);
        let series = |name: &str| {
            let g = a.groups.iter().find(|g| g.name == name).unwrap();
            g.counts.bytes_over_trace.clone()
        };
        let w = 8 << BUCKET_SHIFT;
        assert_eq!(series("early"), [w, w / 2, 0]);
        assert_eq!(series("late"), [0, w / 2, w]);
        assert_eq!(sparkline(&[0, 4, 8]), " ▄█");
    }
}
