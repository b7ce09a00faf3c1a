//! Persistency-bug patterns found in one pass over a trace, before any crash image is
//! made (`persim analyze`; the rules in docs/design/analysis.md). Durability follows the crash
//! model (docs/design/model.md): with volatile caches a cached store is durable after a flush of
//! its line and a later fence, an NT store after a fence (which also drains the line's
//! earlier cached data); with persistent caches every store needs only a fence.
//! Findings are counted per call site and by whose code they are in (`crate::owners`), so
//! that the program's are not buried under its library's and the kernel's.

use crate::line_table::LineTable;
use crate::owners::{Owner, Owners};
use crate::pmdk_rules::{call_site, persisted_range, Breach, PmdkRules};
use persim_model::{unknown_name, CacheMode, Named, UnknownName};
use persim_trace::{Arg, Entry, FenceKind, Hypercall, Meta, Op, Symbols, TraceError};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use strum::{Display, EnumString, IntoStaticStr, VariantNames};

const LINE: u64 = 64;
/// Findings kept per call site as examples; the rest are counted.
const EXAMPLES_PER_SITE: usize = 3;
/// Call sites listed per owner whose findings the text summarises; `--json` has them all.
const SITES_SUMMARISED: usize = 8;
/// Callers shown of a summarised site: enough to name the library function behind a
/// libc copy.
const CALLERS_SUMMARISED: usize = 2;

#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum Kind {
    /// A flush of a line with nothing of its own to write back: no cached store since the
    /// line was last flushed (with persistent caches, every flush); or a program's persist
    /// call of only such lines, at its call site.
    RedundantFlush,
    /// A fence with nothing to order: no store or flush since the previous fence; or a
    /// program's `pmem_drain` then, at its call site.
    RedundantFence,
    /// Stored bytes not durable at a checkpoint, at `success`, or at the end of the trace.
    MissingPersist,
    /// A store to bytes whose previous store never became durable.
    OverwriteUnpersisted,
    /// Several lines flushed between two fences: their order is not fixed (a hint; often a
    /// multi-line persist that a log or journal protects).
    UnorderedFlushes,
    /// A flush of a line no store in the trace wrote.
    FlushUnwritten,
    /// An application store in a libpmemobj transaction to bytes the transaction never
    /// added (PMDK's rule 2; needs `--trace-calls pmdk`).
    TxUnloggedStore,
    /// A `pmem_persist`/`pmemobj_persist` (or flush, msync) of an address outside PM.
    FlushNotPm,
    /// Bytes the application stored in a line that a persist call covered only in part.
    PersistShort,
    /// Bytes of an object a transaction allocated (not zeroed) that nothing stored before
    /// its commit (PMDK's rule 3).
    TxUninitialisedAlloc,
    /// An application load or store to an object a committed transaction freed (rule 4).
    UseAfterFree,
    /// An add to a transaction of bytes another thread's open transaction added (rule 5).
    TxOverlappingAdd,
    /// An add to a transaction of bytes it added already (a performance bug).
    TxDuplicateAdd,
}

impl Kind {
    pub const ALL: [Kind; 13] = [
        Kind::RedundantFlush,
        Kind::RedundantFence,
        Kind::MissingPersist,
        Kind::OverwriteUnpersisted,
        Kind::UnorderedFlushes,
        Kind::FlushUnwritten,
        Kind::TxUnloggedStore,
        Kind::FlushNotPm,
        Kind::PersistShort,
        Kind::TxUninitialisedAlloc,
        Kind::UseAfterFree,
        Kind::TxOverlappingAdd,
        Kind::TxDuplicateAdd,
    ];

    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl Named for Kind {
    const WHAT: &'static str = "pattern";
}

/// One instance of a pattern.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    /// The trace entry where it shows (the flush, the fence, the store, or the barrier a
    /// store was not persisted by).
    pub index: u64,
    /// The PM address involved (of the store, the flush), if any.
    pub addr: Option<u64>,
    pub line: Option<u64>,
    /// The code behind it: the entry's, or for `missing-persist` the last store's.
    pub pc: Option<u64>,
    pub stack: Vec<u64>,
    pub detail: String,
}

/// Findings of one kind from one program counter in one owner's code (a libc function
/// serves the program and the library alike).
#[derive(Clone, Debug, Serialize)]
pub struct Site {
    pub kind: Kind,
    pub owner: Owner,
    pub pc: Option<u64>,
    pub count: u64,
    pub examples: Vec<Finding>,
}

/// What `persim analyze` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Patterns {
    pub cache: CacheMode,
    pub entries: u64,
    /// Findings per kind; every kind is listed.
    pub counts: BTreeMap<Kind, u64>,
    /// Findings per kind in each owner's code, of the owners and kinds found.
    pub by_owner: BTreeMap<Owner, BTreeMap<Kind, u64>>,
    /// Call sites by owner (the program's first), most findings first.
    pub sites: Vec<Site>,
}

impl Patterns {
    pub fn count(&self, kind: Kind) -> u64 {
        self.counts.get(&kind).copied().unwrap_or(0)
    }

    /// Findings of `kind` in the code judged when `code` is asked for (`--code`).
    pub fn count_in(&self, kind: Kind, code: &[Owner]) -> u64 {
        self.by_owner
            .iter()
            .filter(|(owner, _)| owner.judged(code))
            .filter_map(|(_, counts)| counts.get(&kind))
            .sum()
    }

    /// Every example finding, in site order.
    pub fn examples(&self) -> impl Iterator<Item = &Finding> {
        self.sites.iter().flat_map(|s| &s.examples)
    }

    /// The findings as text, by owner: those of the code judged (`code`) first and in
    /// full, each other owner's after them, summarised by call site, so that a library's
    /// or the kernel's findings do not bury the program's. With `symbols`, every address
    /// of code as `function+0xoff [module]`.
    pub fn to_text(&self, symbols: Option<&Symbols>, code: &[Owner]) -> String {
        use fmt::Write as _;
        let mut t = String::new();
        let total = |owner: &Owner| -> u64 {
            self.by_owner
                .get(owner)
                .map_or(0, |counts| counts.values().sum())
        };
        let _ = writeln!(
            t,
            "{} entries, cache {}: {} findings",
            self.entries,
            self.cache,
            self.counts.values().sum::<u64>()
        );
        let columns: Vec<Owner> = Owner::ALL
            .into_iter()
            .filter(|o| *o == Owner::Program || self.by_owner.contains_key(o))
            .collect();
        let _ = write!(t, "  {:<22} {:>9}", "pattern", "total");
        for owner in &columns {
            let _ = write!(t, " {:>9}", owner.to_string());
        }
        for (kind, n) in &self.counts {
            let _ = write!(t, "\n  {:<22} {n:>9}", kind.name());
            for owner in &columns {
                let n = self.by_owner.get(owner).and_then(|c| c.get(kind));
                let _ = write!(t, " {:>9}", n.copied().unwrap_or(0));
            }
        }
        t.push('\n');
        let pc = |site: &Site| {
            site.pc
                .map_or("pc unknown".to_string(), |pc| match symbols {
                    Some(symbols) => format!("pc={pc:#x} ({})", symbols.describe(pc)),
                    None => format!("pc={pc:#x}"),
                })
        };
        let stack = |frames: &[u64]| -> String {
            let frames: Vec<String> = match symbols {
                Some(symbols) => symbols.describe_frames(frames),
                None => frames.iter().map(|a| format!("{a:#x}")).collect(),
            };
            frames.join(" < ")
        };
        let (judged, others): (Vec<Owner>, Vec<Owner>) =
            Owner::ALL.into_iter().partition(|o| o.judged(code));
        if judged.iter().map(total).sum::<u64>() == 0 {
            let asked: Vec<&str> = judged
                .iter()
                .filter(|o| code.contains(o))
                .map(|o| o.code())
                .collect();
            let _ = writeln!(t, "\nno finding in {}", asked.join(" or "));
        }
        for owner in judged {
            let n = total(&owner);
            if n > 0 {
                let _ = writeln!(t, "\n{} in {}:", findings(n), owner.code());
            }
            for site in self.sites.iter().filter(|s| s.owner == owner) {
                let _ = writeln!(t, "\n{} at {}: {}", site.kind, pc(site), site.count);
                for f in &site.examples {
                    let at = f.addr.map_or(String::new(), |a| {
                        format!(" addr {a:#x} line {:#x}", a & !(LINE - 1))
                    });
                    let _ = writeln!(t, "  entry {}{at}: {}", f.index, f.detail);
                    if !f.stack.is_empty() {
                        let _ = writeln!(t, "    stack {}", stack(&f.stack));
                    }
                }
            }
        }
        for owner in others {
            let sites: Vec<&Site> = self.sites.iter().filter(|s| s.owner == owner).collect();
            let n = total(&owner);
            if n == 0 {
                continue;
            }
            let _ = writeln!(
                t,
                "\n{} in {}, summarised (--code {owner} shows them in full):",
                findings(n),
                owner.code()
            );
            for site in sites.iter().take(SITES_SUMMARISED) {
                let _ = writeln!(t, "  {} at {}: {}", site.kind, pc(site), site.count);
                if let Some(f) = site.examples.first().filter(|f| !f.stack.is_empty()) {
                    let callers = &f.stack[..f.stack.len().min(CALLERS_SUMMARISED)];
                    let _ = writeln!(t, "    stack {}", stack(callers));
                }
            }
            if let Some(rest) = sites.get(SITES_SUMMARISED..).filter(|r| !r.is_empty()) {
                let more: u64 = rest.iter().map(|s| s.count).sum();
                let _ = writeln!(t, "  and {more} at {} other sites", rest.len());
            }
        }
        t
    }
}

/// `1 finding`, `2 findings`.
fn findings(n: u64) -> String {
    match n {
        1 => "1 finding".to_owned(),
        n => format!("{n} findings"),
    }
}

/// Scans a trace once: entries as a [`persim_trace::Reader`] gives them, or borrowed.
/// `symbols` (the trace's) tell whose code each finding is in (`crate::owners`); without
/// them all user code is the program's.
pub fn find_patterns<E: Borrow<Entry>>(
    entries: impl IntoIterator<Item = Result<E, TraceError>>,
    cache: CacheMode,
    symbols: Option<&Symbols>,
) -> Result<Patterns, TraceError> {
    let mut scan = Scan::new(cache, symbols);
    for entry in entries {
        scan.step(entry?.borrow());
    }
    Ok(scan.finish())
}

#[derive(Default)]
struct LineState {
    written: bool,
    /// Bytes of cached stores a flush has not yet covered (persistent caches: a fence).
    cached: u64,
    /// Bytes flushed or stored NT, waiting for a fence.
    unfenced: u64,
    /// Listed in `Scan::awaiting`.
    awaiting: bool,
    /// The fence epoch this line was last flushed in.
    flush_epoch: u64,
    /// Listed in `Scan::undurable`.
    undurable: bool,
    last_store: (u64, u64, Meta),
}

impl LineState {
    fn not_durable(&self) -> u64 {
        self.cached | self.unfenced
    }
}

#[derive(Default)]
struct SiteAcc {
    count: u64,
    examples: Vec<Finding>,
}

struct Scan<'a> {
    cache: CacheMode,
    /// PMDK's rules, on the calls the trace records, and whose stores are whose.
    pmdk: PmdkRules,
    owners: Owners<'a>,
    /// The thread of the current entry (0 before any thread switch).
    tid: u32,
    breaches: Vec<Breach>,
    /// By line number (address / 64).
    lines: LineTable<LineState>,
    /// Lines with something a fence makes durable.
    awaiting: Vec<u64>,
    /// Lines stored to since the last barrier, the only ones that may hold bytes not
    /// durable and not yet reported: what a barrier looks at, so that it costs the lines
    /// stored to since, not every line of the trace (nor every line never persisted).
    undurable: Vec<u64>,
    /// A store or flush since the last fence.
    activity: bool,
    epoch: u64,
    /// Distinct lines flushed since the last fence.
    flushed_lines: u64,
    /// The thread whose persist or drain call was just found redundant: the library's
    /// flushes and fence that carry the call out are that finding, not more, until the
    /// thread's next fence, store or call.
    excused: Option<u32>,
    index: u64,
    sites: FxHashMap<(Kind, Owner, Option<u64>), SiteAcc>,
    /// Findings per owner and kind, indexed by `Owner as usize` and `Kind as usize`.
    counts: [[u64; Kind::ALL.len()]; Owner::ALL.len()],
}

impl<'a> Scan<'a> {
    fn new(cache: CacheMode, symbols: Option<&'a Symbols>) -> Scan<'a> {
        Scan {
            cache,
            pmdk: PmdkRules::default(),
            owners: Owners::new(symbols),
            tid: 0,
            breaches: Vec::new(),
            lines: LineTable::new(),
            awaiting: Vec::new(),
            undurable: Vec::new(),
            activity: false,
            epoch: 1,
            flushed_lines: 0,
            excused: None,
            index: 0,
            sites: FxHashMap::default(),
            counts: [[0; Kind::ALL.len()]; Owner::ALL.len()],
        }
    }

    fn step(&mut self, entry: &Entry) {
        if let Some(task) = &entry.meta.task {
            self.tid = task.tid;
        }
        match &entry.op {
            Op::Write { addr, data, nt } => {
                self.excused = self.excused.filter(|&tid| tid != self.tid);
                let program = self.owners.is_program(&entry.meta);
                let logged = program && self.pmdk.logged(self.tid, *addr, data.len() as u64);
                self.store(*addr, data.len() as u64, *nt, logged, &entry.meta);
                self.pmdk.stored(*addr, data.len() as u64);
                if program {
                    let len = data.len() as u64;
                    let (tid, index) = (self.tid, self.index);
                    let out = &mut self.breaches;
                    self.pmdk.store(tid, index, *addr, len, &entry.meta, out);
                }
            }
            Op::Flush { addr, .. } => self.flush(*addr, &entry.meta),
            // An interrupt's drain is no fence of the program (docs/design/model.md).
            Op::Fence(FenceKind::Interrupt) => {}
            Op::Fence(_) => self.fence(&entry.meta),
            Op::Hypercall(Hypercall::Checkpoint(n)) => self.barrier(&format!("checkpoint {n}")),
            Op::Hypercall(Hypercall::Success) => self.barrier("success"),
            Op::Read { addr, size }
                if self.pmdk.watches_loads() && self.owners.is_program(&entry.meta) =>
            {
                let out = &mut self.breaches;
                self.pmdk.load(*addr, *size, &entry.meta, out);
            }
            Op::Return { name, value } => self.pmdk.returned(self.tid, name, value),
            Op::Call { name, args } => {
                let caller = call_site(&entry.meta);
                let by_application = self.owners.is_program(&caller);
                let (tid, index) = (self.tid, self.index);
                let out = &mut self.breaches;
                self.pmdk
                    .call((tid, index), name, args, &entry.meta, by_application, out);
                if by_application {
                    self.excused = self.excused.filter(|&t| t != tid);
                    self.persist_call(name, args, &caller);
                }
            }
            _ => {}
        }
        self.report_breaches();
        self.index += 1;
    }

    fn report_breaches(&mut self) {
        if self.breaches.is_empty() {
            return;
        }
        for b in std::mem::take(&mut self.breaches) {
            self.report(b.kind, b.addr, &b.meta, || b.detail);
        }
    }

    /// A store; `logged`: the program's, to bytes its open transaction logged, which it may
    /// overwrite before they are durable.
    fn store(&mut self, addr: u64, len: u64, nt: bool, logged: bool, meta: &Meta) {
        self.activity = true;
        let end = addr + len;
        let mut start = addr;
        while start < end {
            let line = start & !(LINE - 1);
            let piece_end = end.min(line + LINE);
            let mask = byte_mask(start - line, piece_end - start);
            let state = self.lines.get_or_default(line / LINE);
            let overwritten = state.not_durable() & mask;
            state.written = true;
            if !state.undurable {
                state.undurable = true;
                self.undurable.push(line);
            }
            state.last_store = (self.index, start, meta.clone());
            if nt {
                // an NT store first writes back the line's cached data (docs/design/model.md)
                state.unfenced |= state.cached | mask;
                state.cached = 0;
            } else {
                state.cached |= mask;
            }
            let fence_suffices = nt || self.cache == CacheMode::Persistent;
            if fence_suffices && !state.awaiting {
                state.awaiting = true;
                self.awaiting.push(line);
            }
            if overwritten != 0 && !logged {
                let detail = || {
                    format!(
                        "overwrites bytes {} of the line before they were durable",
                        ranges(overwritten)
                    )
                };
                self.report(Kind::OverwriteUnpersisted, Some(start), meta, detail);
            }
            start = piece_end;
        }
    }

    fn flush(&mut self, addr: u64, meta: &Meta) {
        self.activity = true;
        let line = addr & !(LINE - 1);
        let persistent = self.cache == CacheMode::Persistent;
        let epoch = self.epoch;
        let Some(state) = self.lines.get_mut(line / LINE).filter(|s| s.written) else {
            return self.report(Kind::FlushUnwritten, Some(addr), meta, || {
                "no store in the trace wrote this line".to_string()
            });
        };
        if state.flush_epoch != epoch {
            state.flush_epoch = epoch;
            self.flushed_lines += 1;
        }
        if persistent || state.cached == 0 {
            if self.excused == Some(self.tid) {
                return;
            }
            let why = if persistent {
                "caches are persistent: a fence alone makes stores durable"
            } else {
                "no cached store to the line since it was last flushed"
            };
            return self.report(Kind::RedundantFlush, Some(addr), meta, || why.to_string());
        }
        state.unfenced |= state.cached;
        state.cached = 0;
        if !state.awaiting {
            state.awaiting = true;
            self.awaiting.push(line);
        }
    }

    fn fence(&mut self, meta: &Meta) {
        let excused = self.excused == Some(self.tid);
        self.excused = self.excused.filter(|_| !excused);
        if !self.activity && !excused {
            self.report(Kind::RedundantFence, None, meta, || {
                "no store or flush since the previous fence".to_string()
            });
        }
        if self.flushed_lines >= 2 {
            let n = self.flushed_lines;
            self.report(Kind::UnorderedFlushes, None, meta, || {
                format!("{n} lines flushed since the previous fence persist in any order")
            });
        }
        let persistent = self.cache == CacheMode::Persistent;
        for line in self.awaiting.drain(..) {
            let state = self
                .lines
                .get_mut(line / LINE)
                .expect("awaiting lines are known");
            state.unfenced = 0;
            if persistent {
                state.cached = 0;
            }
            state.awaiting = false;
        }
        self.epoch += 1;
        self.flushed_lines = 0;
        self.activity = false;
    }

    /// A persist, flush or drain call of the program's, at `site`: the program's own
    /// `redundant-flush` when no line of its range holds a store not yet flushed (the
    /// flush instructions are the library's or, through `msync`, the kernel's), and
    /// `redundant-fence` for a drain with no store or flush since the last fence.
    fn persist_call(&mut self, name: &str, args: &[Arg], site: &Meta) {
        if name == "pmem_drain" {
            if !self.activity {
                self.excused = Some(self.tid);
                self.report(Kind::RedundantFence, None, site, || {
                    "pmem_drain with nothing to wait for: no store or flush since the \
                     previous fence"
                        .to_string()
                });
            }
            return;
        }
        let Some((Arg::Pm(start), len)) = persisted_range(name, args).filter(|r| r.1 > 0) else {
            return;
        };
        let lines = start / LINE..(start + len).div_ceil(LINE);
        let dirty = lines.clone().any(|line| {
            let state = self.lines.get_mut(line);
            state.is_some_and(|s| s.cached != 0)
        });
        if dirty {
            return;
        }
        self.excused = Some(self.tid);
        let at = self.pmdk.at(start);
        let n = lines.count();
        self.report(Kind::RedundantFlush, Some(start), site, || {
            format!(
                "{name} of {len} bytes at {at}: no store to its {n} line(s) since they were \
                 last flushed, nothing to write back"
            )
        });
    }

    /// Every line with bytes that are not durable at `what` (reported once until stored
    /// to again).
    fn barrier(&mut self, what: &str) {
        self.pmdk.barrier(&mut self.breaches);
        self.report_breaches();
        let mut missing: Vec<(u64, u64, (u64, u64, Meta))> = Vec::new();
        let lines = &mut self.lines;
        for line in self.undurable.drain(..) {
            let state = lines
                .get_mut(line / LINE)
                .expect("undurable lines are known");
            state.undurable = false;
            if state.not_durable() != 0 {
                // the next report of the line follows a store, which sets its own
                let last = std::mem::take(&mut state.last_store);
                missing.push((line, state.not_durable(), last));
            }
        }
        missing.sort_unstable_by_key(|m| m.0);
        for (_, mask, (store, addr, meta)) in missing {
            let detail = || {
                format!(
                    "bytes {} of the line are not flushed and fenced at {what} \
                     (last store: entry {store})",
                    ranges(mask)
                )
            };
            self.report(Kind::MissingPersist, Some(addr), &meta, detail);
        }
    }

    fn report(
        &mut self,
        kind: Kind,
        addr: Option<u64>,
        meta: &Meta,
        detail: impl FnOnce() -> String,
    ) {
        let owner = self.owners.of(meta);
        self.counts[owner as usize][kind as usize] += 1;
        let site = self.sites.entry((kind, owner, meta.pc)).or_default();
        site.count += 1;
        if site.examples.len() < EXAMPLES_PER_SITE {
            site.examples.push(Finding {
                kind,
                index: self.index,
                addr,
                line: addr.map(|a| a & !(LINE - 1)),
                pc: meta.pc,
                stack: meta.stack.clone(),
                detail: detail(),
            });
        }
    }

    fn finish(mut self) -> Patterns {
        self.barrier("the end of the trace");
        let mut sites: Vec<Site> = self
            .sites
            .into_iter()
            .map(|((kind, owner, pc), acc)| Site {
                kind,
                owner,
                pc,
                count: acc.count,
                examples: acc.examples,
            })
            .collect();
        sites.sort_by(|a, b| {
            a.owner
                .cmp(&b.owner)
                .then(b.count.cmp(&a.count))
                .then(a.kind.cmp(&b.kind))
                .then(a.pc.cmp(&b.pc))
        });
        let by_owner = Owner::ALL
            .into_iter()
            .zip(self.counts)
            .map(|(owner, counts)| {
                let found = Kind::ALL.into_iter().zip(counts).filter(|(_, n)| *n > 0);
                (owner, found.collect::<BTreeMap<Kind, u64>>())
            })
            .filter(|(_, counts)| !counts.is_empty())
            .collect();
        let counts =
            Kind::ALL.map(|kind| self.counts.iter().map(|c| c[kind as usize]).sum::<u64>());
        Patterns {
            cache: self.cache,
            entries: self.index,
            counts: Kind::ALL.into_iter().zip(counts).collect(),
            by_owner,
            sites,
        }
    }
}

/// The bytes `offset..offset + len` of a line as a bit mask.
pub(crate) fn byte_mask(offset: u64, len: u64) -> u64 {
    if len >= LINE {
        u64::MAX
    } else {
        ((1u64 << len) - 1) << offset
    }
}

/// The set bits of a line mask as byte ranges: `0x0..0x8, 0x10..0x18`.
pub(crate) fn ranges(mask: u64) -> String {
    let mut out = Vec::new();
    let mut bit = 0;
    while bit < LINE {
        if mask >> bit & 1 == 0 {
            bit += 1;
            continue;
        }
        let start = bit;
        while bit < LINE && mask >> bit & 1 == 1 {
            bit += 1;
        }
        out.push(format!("{start:#x}..{bit:#x}"));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_listed_in_declaration_order() {
        // `Scan::counts` is indexed by `Kind as usize` and zipped with `Kind::ALL`
        for (i, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i);
        }
    }

    /// Fails when a name users give `--fail-on` or read in the JSON changes, or a kind is
    /// missing here.
    #[test]
    fn kinds_are_named_and_parsed() {
        let names = [
            (Kind::RedundantFlush, "redundant-flush"),
            (Kind::RedundantFence, "redundant-fence"),
            (Kind::MissingPersist, "missing-persist"),
            (Kind::OverwriteUnpersisted, "overwrite-unpersisted"),
            (Kind::UnorderedFlushes, "unordered-flushes"),
            (Kind::FlushUnwritten, "flush-unwritten"),
            (Kind::TxUnloggedStore, "tx-unlogged-store"),
            (Kind::FlushNotPm, "flush-not-pm"),
            (Kind::PersistShort, "persist-short"),
            (Kind::TxUninitialisedAlloc, "tx-uninitialised-alloc"),
            (Kind::UseAfterFree, "use-after-free"),
            (Kind::TxOverlappingAdd, "tx-overlapping-add"),
            (Kind::TxDuplicateAdd, "tx-duplicate-add"),
        ];
        let listed: Vec<&str> = names.iter().map(|(_, name)| *name).collect();
        assert_eq!(Kind::VARIANTS, listed);
        for (kind, name) in names {
            assert_eq!(kind.name(), name);
            assert_eq!(kind.to_string(), name);
            assert_eq!(name.parse(), Ok(kind));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
        }
        assert_eq!(
            "missing-flush".parse::<Kind>().unwrap_err().to_string(),
            "unknown pattern 'missing-flush' (expected redundant-flush, redundant-fence, \
             missing-persist, overwrite-unpersisted, unordered-flushes, flush-unwritten, \
             tx-unlogged-store, flush-not-pm, persist-short, tx-uninitialised-alloc, \
             use-after-free, tx-overlapping-add or tx-duplicate-add)"
        );
    }

    #[test]
    fn masks_and_ranges() {
        assert_eq!(byte_mask(0, 64), u64::MAX);
        assert_eq!(byte_mask(8, 8), 0xff00);
        assert_eq!(ranges(0xff00 | 1 << 63), "0x8..0x10, 0x3f..0x40");
    }
}
