//! How a trace uses PM (`persim profile`), per checkpoint interval and for the whole
//! trace: cached vs non-temporal bytes, store sizes, flushes and fences per KiB written,
//! the write amplification if every fence epoch wrote whole 256-byte XPLines (the media's
//! write unit on Optane), XPLines written partially (read-modify-write on the media), and
//! PMicroProfile's sequentiality metric ISAD. Definitions in docs/design/analysis.md.

use persim_trace::{Entry, FenceKind, FlushKind, Hypercall, Op, Symbols, TraceError};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

const XPLINE: u64 = 256;

/// The counts of one part of a trace. Ratios are derived in [`Stats::derived`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    pub entries: u64,
    pub stores: u64,
    pub bytes_cached: u64,
    pub bytes_nt: u64,
    /// Stores by size in bytes.
    pub store_sizes: BTreeMap<u64, u64>,
    pub flushes: BTreeMap<&'static str, u64>,
    pub fences: BTreeMap<&'static str, u64>,
    pub reads: u64,
    pub bytes_read: u64,
    /// Fence epochs that wrote something (a trailing epoch ends at the end of the trace).
    pub epochs: u64,
    /// 256 bytes per XPLine each epoch wrote to.
    pub xpline_bytes: u64,
    /// XPLines an epoch wrote to without writing all of their 256 bytes.
    pub partial_xplines: u64,
    /// Accesses (stores and reads) that do not start where the previous one ended.
    pub nonsequential: u64,
}

/// Ratios of [`Stats`], for people and plots.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Derived {
    /// Share of stored bytes written non-temporally.
    pub nt_share: f64,
    pub flushes_per_kib: f64,
    pub fences_per_kib: f64,
    /// XPLine bytes / bytes written (1.0: every epoch wrote whole XPLines).
    pub write_amplification: f64,
    /// Share of accesses not contiguous with the previous one: 0 sequential, 1 random.
    pub isad: f64,
}

impl Stats {
    pub fn bytes_written(&self) -> u64 {
        self.bytes_cached + self.bytes_nt
    }

    pub fn derived(&self) -> Derived {
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let written = self.bytes_written();
        let kib = written as f64 / 1024.0;
        let per_kib = |n: u64| if kib == 0.0 { 0.0 } else { n as f64 / kib };
        Derived {
            nt_share: ratio(self.bytes_nt, written),
            flushes_per_kib: per_kib(self.flushes.values().sum()),
            fences_per_kib: per_kib(self.fences.values().sum()),
            write_amplification: ratio(self.xpline_bytes, written),
            isad: ratio(self.nonsequential, self.stores + self.reads),
        }
    }

    fn add(&mut self, other: &Stats) {
        self.entries += other.entries;
        self.stores += other.stores;
        self.bytes_cached += other.bytes_cached;
        self.bytes_nt += other.bytes_nt;
        for (k, v) in &other.store_sizes {
            *self.store_sizes.entry(*k).or_default() += v;
        }
        for (k, v) in &other.flushes {
            *self.flushes.entry(k).or_default() += v;
        }
        for (k, v) in &other.fences {
            *self.fences.entry(k).or_default() += v;
        }
        self.reads += other.reads;
        self.bytes_read += other.bytes_read;
        self.epochs += other.epochs;
        self.xpline_bytes += other.xpline_bytes;
        self.partial_xplines += other.partial_xplines;
        self.nonsequential += other.nonsequential;
    }
}

/// One part of the trace: before the first checkpoint, or checkpoint N to N+1 (or to the
/// end).
#[derive(Clone, Debug, Serialize)]
pub struct Part {
    /// The checkpoint it starts at; None before the first.
    pub from: Option<u64>,
    pub stats: Stats,
    pub derived: Derived,
}

/// What the code at one place did to PM: a function (through the trace's symbols) or,
/// without symbols, one program counter.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CodeStats {
    pub code: String,
    pub stores: u64,
    pub bytes_cached: u64,
    pub bytes_nt: u64,
    pub flushes: u64,
    pub fences: u64,
}

impl CodeStats {
    fn add(&mut self, other: &CodeStats) {
        self.stores += other.stores;
        self.bytes_cached += other.bytes_cached;
        self.bytes_nt += other.bytes_nt;
        self.flushes += other.flushes;
        self.fences += other.fences;
    }
}

/// Functions (or pcs) shown in the text, most bytes first; the JSON has them all.
const CODE_SHOWN: usize = 10;

#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    pub parts: Vec<Part>,
    pub total: Stats,
    pub total_derived: Derived,
    /// Per function (or pc) of the storing, flushing and fencing instructions, most bytes
    /// written first.
    pub code: Vec<CodeStats>,
    /// What the plots show (`persim profile --svg`); not in the JSON.
    #[serde(skip)]
    pub series: Series,
}

/// Entries between two points of [`Series::timeline`] as it is recorded; it is thinned
/// to at most [`TIMELINE_POINTS`] at the end.
const TIMELINE_STEP: u64 = 256;
const TIMELINE_POINTS: usize = 2000;

/// The trace over time and space, for plots.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// (entry index, cached bytes so far, NT bytes so far), from the start of the trace
    /// to its end at regular steps of entries.
    pub timeline: Vec<(u64, u64, u64)>,
    /// Fence epochs by the bytes they wrote: k -> epochs of 2^(k-1) < bytes <= 2^k.
    pub epoch_sizes: BTreeMap<u32, u64>,
    /// Bytes written per cache line (its PM offset).
    pub line_bytes: BTreeMap<u64, u64>,
}

impl Profile {
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let header = [
            "part",
            "entries",
            "bytes",
            "NT",
            "flush/KiB",
            "fence/KiB",
            "ampl.",
            "partial XPL",
            "ISAD",
            "reads",
        ];
        let mut rows = vec![header.map(str::to_string).to_vec()];
        let row = |name: String, s: &Stats, d: &Derived| {
            vec![
                name,
                s.entries.to_string(),
                s.bytes_written().to_string(),
                format!("{:.0} %", d.nt_share * 100.0),
                format!("{:.2}", d.flushes_per_kib),
                format!("{:.2}", d.fences_per_kib),
                format!("{:.2}", d.write_amplification),
                s.partial_xplines.to_string(),
                format!("{:.2}", d.isad),
                s.reads.to_string(),
            ]
        };
        for part in &self.parts {
            let name = match part.from {
                None => "start".to_string(),
                Some(n) => format!("cp {n}"),
            };
            rows.push(row(name, &part.stats, &part.derived));
        }
        rows.push(row("total".into(), &self.total, &self.total_derived));
        let widths: Vec<usize> = (0..header.len())
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        for r in &rows {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (cell, w))| match c {
                    0 => format!("{cell:<w$}"),
                    _ => format!("{cell:>w$}"),
                })
                .collect();
            let _ = writeln!(t, "{}", cells.join("  ").trim_end());
        }
        let total = &self.total;
        let list = |m: &BTreeMap<&str, u64>| {
            let items: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        let sizes: Vec<String> = total
            .store_sizes
            .iter()
            .map(|(size, n)| format!("{size} B: {n}"))
            .collect();
        let _ = writeln!(t, "\nstores by size: {}", sizes.join(", "));
        let _ = writeln!(t, "flushes: {}", list(&total.flushes));
        let _ = writeln!(t, "fences: {}", list(&total.fences));
        let _ = writeln!(
            t,
            "fence epochs that wrote: {}, XPLines written {} ({} partially)",
            total.epochs,
            total.xpline_bytes / XPLINE,
            total.partial_xplines
        );
        if !self.code.is_empty() {
            let _ = writeln!(t, "\nby code (most bytes first):");
            let _ = writeln!(
                t,
                "  {:>10} {:>8} {:>5} {:>8} {:>7}  code",
                "bytes", "stores", "NT", "flushes", "fences"
            );
            for c in self.code.iter().take(CODE_SHOWN) {
                let bytes = c.bytes_cached + c.bytes_nt;
                let nt = if bytes == 0 {
                    0.0
                } else {
                    c.bytes_nt as f64 * 100.0 / bytes as f64
                };
                let _ = writeln!(
                    t,
                    "  {bytes:>10} {:>8} {nt:>4.0}% {:>8} {:>7}  {}",
                    c.stores, c.flushes, c.fences, c.code
                );
            }
            if self.code.len() > CODE_SHOWN {
                let _ = writeln!(
                    t,
                    "  and {} more (--json lists them)",
                    self.code.len() - CODE_SHOWN
                );
            }
        }
        t
    }
}

/// The function at `pc` (with its module), or the pc itself without symbols for it.
pub(crate) fn code_name(symbols: Option<&Symbols>, pc: u64) -> String {
    match symbols.and_then(|s| s.resolve(pc)) {
        Some(l) => match l.module {
            Some(m) => format!("{} [{m}]", l.function),
            None => l.function.to_owned(),
        },
        None => format!("{pc:#x}"),
    }
}

/// Profiles a trace in one pass; `symbols` group its code by function.
pub fn profile<E: Borrow<Entry>>(
    entries: impl IntoIterator<Item = Result<E, TraceError>>,
    symbols: Option<&Symbols>,
) -> Result<Profile, TraceError> {
    let mut p = Profiler::default();
    for entry in entries {
        p.step(entry?.borrow());
    }
    Ok(p.finish(symbols))
}

#[derive(Default)]
struct Profiler {
    parts: Vec<Part>,
    from: Option<u64>,
    current: Stats,
    /// XPLine -> the bytes of it this fence epoch wrote (256 bits).
    epoch: FxHashMap<u64, [u64; 4]>,
    /// Where the previous access ended.
    next_addr: Option<u64>,
    /// Bytes the current epoch wrote.
    epoch_bytes: u64,
    index: u64,
    cached: u64,
    nt: u64,
    timeline: Vec<(u64, u64, u64)>,
    epoch_sizes: BTreeMap<u32, u64>,
    line_bytes: FxHashMap<u64, u64>,
    /// Per pc of a store, flush or fence.
    pcs: FxHashMap<u64, CodeStats>,
}

impl Profiler {
    fn step(&mut self, entry: &Entry) {
        // `hypercall checkpoint N` is the first entry of the part it starts (as its
        // failure point belongs to checkpoint N, docs/design/model.md)
        if let Op::Hypercall(Hypercall::Checkpoint(n)) = entry.op {
            self.end_part();
            self.from = Some(n);
        }
        self.current.entries += 1;
        self.index += 1;
        if self.index.is_multiple_of(TIMELINE_STEP) {
            self.timeline.push((self.index, self.cached, self.nt));
        }
        if let (Some(pc), Op::Write { .. } | Op::Flush { .. } | Op::Fence(_)) =
            (entry.meta.pc, &entry.op)
        {
            let c = self.pcs.entry(pc).or_default();
            match &entry.op {
                Op::Write { data, nt: true, .. } => c.bytes_nt += data.len() as u64,
                Op::Write { data, .. } => c.bytes_cached += data.len() as u64,
                Op::Flush { .. } => c.flushes += 1,
                _ => c.fences += 1,
            }
            c.stores += u64::from(matches!(entry.op, Op::Write { .. }));
        }
        match &entry.op {
            Op::Write { addr, data, nt } => self.store(*addr, data.len() as u64, *nt),
            Op::Read { addr, size } => {
                self.current.reads += 1;
                self.current.bytes_read += size;
                self.access(*addr, *size);
            }
            Op::Flush { kind, .. } => {
                let name = match kind {
                    FlushKind::Clwb => "clwb",
                    FlushKind::Clflushopt => "clflushopt",
                    FlushKind::Clflush => "clflush",
                };
                *self.current.flushes.entry(name).or_default() += 1;
            }
            // An interrupt's drain is no fence of the program (docs/design/model.md).
            Op::Fence(FenceKind::Interrupt) => {}
            Op::Fence(kind) => {
                *self.current.fences.entry(kind.name()).or_default() += 1;
                self.end_epoch();
            }
            _ => {}
        }
    }

    fn store(&mut self, addr: u64, len: u64, nt: bool) {
        let s = &mut self.current;
        s.stores += 1;
        if nt {
            s.bytes_nt += len;
            self.nt += len;
        } else {
            s.bytes_cached += len;
            self.cached += len;
        }
        self.epoch_bytes += len;
        let mut start = addr;
        while start < addr + len {
            let end = (addr + len).min(start / 64 * 64 + 64);
            *self.line_bytes.entry(start / 64 * 64).or_default() += end - start;
            start = end;
        }
        *s.store_sizes.entry(len).or_default() += 1;
        self.access(addr, len);
        for byte in addr..addr + len {
            let bits = self.epoch.entry(byte / XPLINE).or_default();
            let bit = byte % XPLINE;
            bits[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    fn access(&mut self, addr: u64, len: u64) {
        if self.next_addr != Some(addr) {
            self.current.nonsequential += 1;
        }
        self.next_addr = Some(addr + len);
    }

    fn end_epoch(&mut self) {
        if self.epoch.is_empty() {
            return;
        }
        let bucket = u64::BITS - (self.epoch_bytes.max(1) - 1).leading_zeros();
        *self.epoch_sizes.entry(bucket).or_default() += 1;
        self.epoch_bytes = 0;
        let s = &mut self.current;
        s.epochs += 1;
        s.xpline_bytes += self.epoch.len() as u64 * XPLINE;
        s.partial_xplines += self
            .epoch
            .values()
            .filter(|bits| bits.iter().any(|&b| b != u64::MAX))
            .count() as u64;
        self.epoch.clear();
    }

    fn end_part(&mut self) {
        if self.current.entries == 0 {
            return;
        }
        let stats = std::mem::take(&mut self.current);
        self.parts.push(Part {
            from: self.from,
            derived: stats.derived(),
            stats,
        });
    }

    fn finish(mut self, symbols: Option<&Symbols>) -> Profile {
        let mut code: BTreeMap<String, CodeStats> = BTreeMap::new();
        for (pc, stats) in &self.pcs {
            code.entry(code_name(symbols, *pc)).or_default().add(stats);
        }
        let mut code: Vec<CodeStats> = code
            .into_iter()
            .map(|(name, stats)| CodeStats {
                code: name,
                ..stats
            })
            .collect();
        code.sort_by_key(|c| {
            std::cmp::Reverse((c.bytes_cached + c.bytes_nt, c.flushes + c.fences))
        });
        self.end_epoch();
        self.end_part();
        let mut total = Stats::default();
        for part in &self.parts {
            total.add(&part.stats);
        }
        self.timeline.push((self.index, self.cached, self.nt));
        let keep_every = self.timeline.len().div_ceil(TIMELINE_POINTS).max(1);
        let last = self.timeline.len() - 1;
        let timeline: Vec<(u64, u64, u64)> = std::iter::once((0, 0, 0))
            .chain(
                self.timeline
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % keep_every == 0 || *i == last)
                    .map(|(_, p)| *p),
            )
            .collect();
        Profile {
            total_derived: total.derived(),
            total,
            code,
            parts: self.parts,
            series: Series {
                timeline,
                epoch_sizes: self.epoch_sizes,
                line_bytes: self.line_bytes.into_iter().collect(),
            },
        }
    }
}
