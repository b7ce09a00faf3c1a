//! PMDK's programming rules, checked on the library calls a trace records (`--trace-calls
//! pmdk`; docs/design/analysis.md, "PMDK's rules"): stores in a transaction to bytes it never
//! logged (`tx-unlogged-store`), transactions of two threads adding the same bytes
//! (`tx-overlapping-add`), adds of bytes the transaction added already
//! (`tx-duplicate-add`, a performance bug), persists of addresses outside PM
//! (`flush-not-pm`), and persists too short for the bytes stored (`persist-short`); the
//! rules on allocated and freed objects are `crate::pmdk_objects`'.
//!
//! Only the application's stores and calls are judged (`crate::owners` tells whose they
//! are).

use crate::pmdk_objects::Objects;
use persim_trace::{Arg, Meta};
use rustc_hash::FxHashMap;

const LINE: u64 = 64;

/// A rule broken, for the scan to report.
pub(crate) struct Breach {
    pub kind: super::patterns::Kind,
    pub addr: Option<u64>,
    pub meta: Meta,
    pub detail: String,
}

/// A thread's transaction.
#[derive(Default)]
struct Tx {
    depth: u32,
    /// Between `pmemobj_tx_begin` and the outermost commit: stores must be logged.
    work: bool,
    /// The pool's PM offset (pmemobj_tx_begin's first argument), for messages.
    pool: Option<u64>,
    begun: u64,
    /// Ranges added to the transaction, [start, end), and the entry that added each.
    added: Vec<(u64, u64)>,
    added_at: Vec<u64>,
    /// Objects allocated in it: its stores to them need no add.
    allocated: Vec<(u64, u64)>,
}

/// A line's bytes stored by the application outside transactions that no persist call
/// has covered since.
#[derive(Default)]
struct Uncovered {
    mask: u64,
    /// A persist call covered part of the line: its entry and the range it covered.
    persist: Option<(u64, String, u64, u64)>,
    last_store: (u64, u64, Meta),
}

#[derive(Default)]
pub(crate) struct PmdkRules {
    txs: FxHashMap<u32, Tx>,
    lines: FxHashMap<u64, Uncovered>,
    objects: Objects,
    /// The last pool a transaction named: addresses in messages are offsets from it.
    pool: Option<u64>,
}

/// `pool+0xOFF` for an address in `pool`, else the PM offset.
fn in_pool(pool: Option<u64>, addr: u64) -> String {
    match pool {
        Some(pool) if addr >= pool => format!("pool+{:#x}", addr - pool),
        _ => format!("{addr:#x}"),
    }
}

/// A call entry's metadata as its call site's: the caller's return address as the pc, so
/// that findings are grouped by the code that called, not by the function called.
pub(crate) fn call_site(meta: &Meta) -> Meta {
    match meta.stack.split_first() {
        Some((&caller, callers)) => Meta {
            pc: Some(caller),
            stack: callers.to_vec(),
            task: None,
        },
        None => meta.clone(),
    }
}

/// The (address, length) a persist or flush call names, by function.
pub(crate) fn persisted_range(name: &str, args: &[Arg]) -> Option<(Arg, u64)> {
    let (addr, len) = match name {
        "pmem_persist" | "pmem_flush" | "pmem_msync" => (args.first()?, args.get(1)?),
        "pmemobj_persist" | "pmemobj_flush" => (args.get(1)?, args.get(2)?),
        _ => return None,
    };
    match len {
        Arg::Value(len) => Some((*addr, *len)),
        Arg::Pm(_) => None,
    }
}

/// The range a `pmemobj_tx_*add_range*` call adds, if in PM.
fn added_range(name: &str, args: &[Arg]) -> Option<(u64, u64)> {
    let value = |i: usize| match args.get(i) {
        Some(Arg::Value(v)) => Some(*v),
        _ => None,
    };
    let (start, len) = match name {
        "pmemobj_tx_add_range" | "pmemobj_tx_xadd_range" => match args.get(1)? {
            Arg::Pm(object) => (object + value(2)?, value(3)?),
            Arg::Value(_) => return None,
        },
        "pmemobj_tx_add_range_direct" | "pmemobj_tx_xadd_range_direct" => match args.first()? {
            Arg::Pm(start) => (*start, value(1)?),
            Arg::Value(_) => return None,
        },
        _ => return None,
    };
    Some((start, start + len))
}

impl PmdkRules {
    /// A call of `name` by thread `tid` at entry `index`.
    pub fn call(
        &mut self,
        (tid, index): (u32, u64),
        name: &str,
        args: &[Arg],
        meta: &Meta,
        by_application: bool,
        out: &mut Vec<Breach>,
    ) {
        self.objects.call((tid, index), name, args, meta);
        let tx = self.txs.entry(tid).or_default();
        match name {
            "pmemobj_tx_begin" => {
                if tx.depth == 0 {
                    tx.added.clear();
                    tx.added_at.clear();
                    tx.allocated.clear();
                    tx.begun = index;
                    tx.pool = match args.first() {
                        Some(Arg::Pm(pool)) => Some(*pool),
                        _ => None,
                    };
                    self.pool = tx.pool.or(self.pool);
                }
                tx.depth += 1;
                tx.work = true;
            }
            "pmemobj_tx_commit" if tx.depth <= 1 => {
                tx.work = false;
                let pool = self.pool;
                let at = |addr| in_pool(pool, addr);
                self.objects.commit((tid, index), at, out);
            }
            "pmemobj_tx_end" => {
                tx.depth = tx.depth.saturating_sub(1);
                if tx.depth == 0 {
                    tx.work = false;
                    tx.added.clear();
                    tx.added_at.clear();
                    tx.allocated.clear();
                    self.objects.end(tid);
                }
            }
            _ => {}
        }
        if let Some((start, end)) = added_range(name, args) {
            if by_application {
                self.overlapping_add((tid, index), (start, end), meta, out);
                self.duplicate_add(tid, name, (start, end), meta, out);
            }
            let tx = self.txs.entry(tid).or_default();
            tx.added.push((start, end));
            tx.added_at.push(index);
        }
        let Some((addr, len)) = persisted_range(name, args) else {
            return;
        };
        match addr {
            Arg::Value(addr) if by_application && len > 0 => out.push(Breach {
                kind: super::patterns::Kind::FlushNotPm,
                addr: None,
                meta: call_site(meta),
                detail: format!(
                    "{name} of {len} bytes at {addr:#x}, which is not PM (a stack or heap \
                     variable?): pass the address of the PM object it copies"
                ),
            }),
            Arg::Value(_) => {}
            Arg::Pm(start) => self.cover(index, name, start, start + len),
        }
    }

    /// An add of [start, end) by thread `tid`: the transactions of other threads open now
    /// must not have added any of it (rule 5: they are not independent).
    fn overlapping_add(
        &self,
        (tid, index): (u32, u64),
        (start, end): (u64, u64),
        meta: &Meta,
        out: &mut Vec<Breach>,
    ) {
        let mut others: Vec<(u32, &Tx)> = self
            .txs
            .iter()
            .filter(|(&t, tx)| t != tid && tx.depth > 0)
            .map(|(&t, tx)| (t, tx))
            .collect();
        others.sort_unstable_by_key(|(t, _)| *t);
        for (other, tx) in others {
            let Some(i) = tx.added.iter().position(|&(s, e)| s < end && start < e) else {
                continue;
            };
            let ((s, e), added) = (tx.added[i], tx.added_at[i]);
            let (from, to) = (start.max(s), end.min(e));
            out.push(Breach {
                kind: super::patterns::Kind::TxOverlappingAdd,
                addr: Some(from),
                meta: call_site(meta),
                detail: format!(
                    "thread {tid} adds {} bytes at {} that thread {other}'s open transaction \
                     (begun at entry {}) added at entry {added}: serialise the two \
                     transactions (pmemobj_mutex_lock, or TX_BEGIN_PARAM with TX_PARAM_MUTEX) \
                     before this add (entry {index})",
                    to - from,
                    in_pool(self.pool, from),
                    tx.begun
                ),
            });
            return;
        }
    }

    /// An add of [start, end) by thread `tid`: a performance bug when its open transaction
    /// added every byte of it already (libpmemobj looks the range up and logs nothing).
    fn duplicate_add(
        &self,
        tid: u32,
        name: &str,
        (start, end): (u64, u64),
        meta: &Meta,
        out: &mut Vec<Breach>,
    ) {
        let Some(tx) = self.txs.get(&tid).filter(|tx| tx.depth > 0) else {
            return;
        };
        if start == end || !uncovered(start, end, &tx.added).is_empty() {
            return;
        }
        let first = tx.added.iter().position(|&(s, e)| s <= start && start < e);
        let added = tx.added_at[first.expect("every byte was added")];
        out.push(Breach {
            kind: super::patterns::Kind::TxDuplicateAdd,
            addr: Some(start),
            meta: call_site(meta),
            detail: format!(
                "{name} of {} bytes at {} that the transaction (begun at entry {}) added \
                 already (at entry {added}): drop this add",
                end - start,
                in_pool(self.pool, start),
                tx.begun
            ),
        });
    }

    /// The return of a traced call to thread `tid`: an object allocated in its
    /// transaction is the transaction's to write.
    pub fn returned(&mut self, tid: u32, name: &str, value: &Arg) {
        if let Some(object) = self.objects.returned(tid, name, value) {
            self.txs.entry(tid).or_default().allocated.push(object);
        }
    }

    /// Any store, the library's and the kernel's too: it initialises new objects.
    pub fn stored(&mut self, addr: u64, len: u64) {
        self.objects.stored(addr, len);
    }

    /// `addr` in messages: `pool+0xOFF` in the last pool a transaction named.
    pub fn at(&self, addr: u64) -> String {
        in_pool(self.pool, addr)
    }

    /// Whether loads are judged now: only while a committed transaction's free is known.
    pub fn watches_loads(&self) -> bool {
        self.objects.has_freed()
    }

    /// An application load (traces recorded with `--reads`).
    pub fn load(&self, addr: u64, len: u64, meta: &Meta, out: &mut Vec<Breach>) {
        let pool = self.pool;
        let at = |a| in_pool(pool, a);
        self.objects.accessed((addr, len, false), meta, at, out);
    }

    /// A persist call's range: its bytes are covered, and the lines it touched are judged
    /// at the next barrier.
    fn cover(&mut self, index: u64, name: &str, start: u64, end: u64) {
        let mut line = start & !(LINE - 1);
        while line < end {
            if let Some(u) = self.lines.get_mut(&line) {
                let from = start.max(line) - line;
                let to = end.min(line + LINE) - line;
                u.mask &= !super::patterns::byte_mask(from, to - from);
                u.persist = Some((index, name.to_owned(), start, end));
            }
            line += LINE;
        }
    }

    /// Whether thread `tid`'s open transaction holds `len` bytes at `addr` in its undo log
    /// (added, or allocated by it): overwriting them before they are durable is what a
    /// transaction is for, its commit persists them.
    pub fn logged(&self, tid: u32, addr: u64, len: u64) -> bool {
        let Some(tx) = self.txs.get(&tid).filter(|tx| tx.work) else {
            return false;
        };
        let end = addr + len;
        (tx.added.iter().chain(&tx.allocated)).any(|&(s, e)| s <= addr && end <= e)
    }

    /// An application store of `len` bytes at `addr` (within one line).
    pub fn store(
        &mut self,
        tid: u32,
        index: u64,
        addr: u64,
        len: u64,
        meta: &Meta,
        out: &mut Vec<Breach>,
    ) {
        let pool = self.pool;
        self.objects
            .accessed((addr, len, true), meta, |a| in_pool(pool, a), out);
        let tx = self.txs.entry(tid).or_default();
        if tx.work {
            let end = addr + len;
            let ranges = || tx.added.iter().chain(&tx.allocated);
            // nearly always one range holds the whole store: no need to cut it up
            if ranges().any(|&(s, e)| s <= addr && end <= e) {
                return;
            }
            let missing: Vec<(u64, u64)> = uncovered(addr, end, &tx.added)
                .into_iter()
                .flat_map(|(s, e)| uncovered(s, e, &tx.allocated))
                .collect();
            if let Some(&(start, end)) = missing.first() {
                let bytes: u64 = missing.iter().map(|(s, e)| e - s).sum();
                let at = in_pool(tx.pool, start);
                out.push(Breach {
                    kind: super::patterns::Kind::TxUnloggedStore,
                    addr: Some(start),
                    meta: meta.clone(),
                    detail: format!(
                        "add pmemobj_tx_add_range for {bytes} bytes at {at} before this store: \
                         the transaction begun at entry {} never added them ({:#x}..{end:#x})",
                        tx.begun, start
                    ),
                });
            }
            return;
        }
        let line = addr & !(LINE - 1);
        let u = self.lines.entry(line).or_default();
        u.mask |= super::patterns::byte_mask(addr - line, len);
        u.last_store = (index, addr, meta.clone());
    }

    /// At a checkpoint, `success` or the end: the lines a persist call covered only in
    /// part.
    pub fn barrier(&mut self, out: &mut Vec<Breach>) {
        let mut short: Vec<(u64, Uncovered)> = Vec::new();
        self.lines.retain(|&line, u| {
            if u.mask != 0 && u.persist.is_some() {
                short.push((line, std::mem::take(u)));
            }
            false
        });
        short.sort_unstable_by_key(|s| s.0);
        for (line, u) in short {
            let (call, name, start, end) = u.persist.expect("kept only with a persist");
            let (store, addr, meta) = u.last_store;
            out.push(Breach {
                kind: super::patterns::Kind::PersistShort,
                addr: Some(addr),
                meta,
                detail: format!(
                    "bytes {} of line {line:#x} were stored (last: entry {store}) but no persist \
                     covered them; the {name} at entry {call} covered {start:#x}..{end:#x}: \
                     make it cover the whole object",
                    super::patterns::ranges(u.mask)
                ),
            });
        }
    }
}

/// The parts of [start, end) outside every range of `added`.
pub(crate) fn uncovered(start: u64, end: u64, added: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut parts = vec![(start, end)];
    for &(a, b) in added {
        parts = parts
            .into_iter()
            .flat_map(|(s, e)| {
                if b <= s || a >= e {
                    vec![(s, e)]
                } else {
                    [(s, a.max(s)), (b.min(e), e)]
                        .into_iter()
                        .filter(|(x, y)| x < y)
                        .collect()
                }
            })
            .collect();
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_no_added_range_covers() {
        assert_eq!(uncovered(0x10, 0x18, &[]), [(0x10, 0x18)]);
        assert_eq!(uncovered(0x10, 0x18, &[(0x0, 0x40)]), []);
        assert_eq!(
            uncovered(0x10, 0x20, &[(0x12, 0x14), (0x18, 0x1c)]),
            [(0x10, 0x12), (0x14, 0x18), (0x1c, 0x20)]
        );
    }
}
