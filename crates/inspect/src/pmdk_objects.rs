//! PMDK's rules on the objects a transaction allocates and frees (docs/design/analysis.md,
//! "PMDK's rules"): bytes of a new object never stored before commit
//! (`tx-uninitialised-alloc`, rule 3), and accesses to an object a committed transaction
//! freed (`use-after-free`, rule 4). An allocation's object is its call's `return` entry;
//! its size the call's first argument. A freed object's size is the one the tracer read
//! from its allocation header (the free's third argument), else its allocation's in the
//! trace.

use super::patterns::Kind;
use super::pmdk_rules::{call_site, Breach};
use persim_trace::{Arg, Meta};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// `POBJ_XALLOC_ZERO`: `pmemobj_tx_xalloc`'s flag for a zeroed object.
const XALLOC_ZERO: u64 = 1;

/// An allocation call awaiting its return.
struct AllocCall {
    size: u64,
    zeroed: bool,
    site: Meta,
}

/// An object allocated (not zeroed) in a transaction not yet committed.
struct Fresh {
    tid: u32,
    start: u64,
    end: u64,
    /// Its bytes no store has written yet.
    unstored: Vec<(u64, u64)>,
    site: Meta,
}

/// An object freed by a transaction.
struct Freed {
    end: u64,
    /// The entry of its `pmemobj_tx_free` and of the commit that made it final.
    free: u64,
    commit: u64,
}

#[derive(Default)]
pub(crate) struct Objects {
    calls: FxHashMap<u32, AllocCall>,
    /// The size of every object allocated in the trace, by its start: what a free frees
    /// when the trace has no size for it.
    sizes: FxHashMap<u64, u64>,
    fresh: Vec<Fresh>,
    /// Freed in a transaction still open, by its thread and start.
    freeing: Vec<(u32, u64, Freed)>,
    /// Freed by committed transactions, by start (they do not overlap: an allocation
    /// over one ends it).
    freed: BTreeMap<u64, Freed>,
}

impl Objects {
    /// A call of an allocation or free function by thread `tid` at entry `index`.
    pub fn call(&mut self, (tid, index): (u32, u64), name: &str, args: &[Arg], meta: &Meta) {
        let value = |i: usize| match args.get(i) {
            Some(Arg::Value(v)) => Some(*v),
            _ => None,
        };
        let zeroed = match name {
            "pmemobj_tx_alloc" => false,
            "pmemobj_tx_zalloc" => true,
            "pmemobj_tx_xalloc" => value(2).is_some_and(|flags| flags & XALLOC_ZERO != 0),
            "pmemobj_tx_free" => {
                if let Some(&Arg::Pm(start)) = args.get(1) {
                    let size = value(2).or_else(|| self.sizes.get(&start).copied());
                    if let Some(size) = size {
                        let freed = Freed {
                            end: start + size,
                            free: index,
                            commit: 0,
                        };
                        self.freeing.push((tid, start, freed));
                    }
                }
                return;
            }
            _ => return,
        };
        if let Some(size) = value(0) {
            let site = call_site(meta);
            self.calls.insert(tid, AllocCall { size, zeroed, site });
        }
    }

    /// The return of `name` to thread `tid`: the object an allocation made, if any.
    pub fn returned(&mut self, tid: u32, name: &str, value: &Arg) -> Option<(u64, u64)> {
        if !name.starts_with("pmemobj_tx_") || !name.ends_with("alloc") {
            return None;
        }
        let call = self.calls.remove(&tid)?;
        let &Arg::Pm(start) = value else {
            return None;
        };
        let end = start + call.size;
        self.sizes.insert(start, call.size);
        // its bytes are a new object's now, whatever was freed there before
        let ended: Vec<u64> = self
            .freed
            .range(..end)
            .rev()
            .take_while(|(_, f)| f.end > start)
            .map(|(&s, _)| s)
            .collect();
        for s in ended {
            self.freed.remove(&s);
        }
        if !call.zeroed && call.size > 0 {
            self.fresh.push(Fresh {
                tid,
                start,
                end,
                unstored: vec![(start, end)],
                site: call.site,
            });
        }
        Some((start, end))
    }

    /// A store of anyone's (the library's copies initialise an object too).
    pub fn stored(&mut self, addr: u64, len: u64) {
        let end = addr + len;
        for f in &mut self.fresh {
            if addr < f.end && end > f.start {
                cut(&mut f.unstored, addr, end);
            }
        }
    }

    pub fn has_freed(&self) -> bool {
        !self.freed.is_empty()
    }

    /// An access of the application's: a finding if it touches a freed object.
    pub fn accessed(
        &self,
        (addr, len, store): (u64, u64, bool),
        meta: &Meta,
        at: impl Fn(u64) -> String,
        out: &mut Vec<Breach>,
    ) {
        let Some((&start, f)) = self.freed.range(..addr + len).next_back() else {
            return;
        };
        if f.end <= addr {
            return;
        }
        let what = if store { "store" } else { "load" };
        out.push(Breach {
            kind: Kind::UseAfterFree,
            addr: Some(addr),
            meta: meta.clone(),
            detail: format!(
                "{what} of {len} bytes at {} in the {}-byte object at {} that pmemobj_tx_free \
                 freed (entry {}, committed at entry {}): read what you need before \
                 TX_FREE, and drop the object's PMEMoid",
                at(addr),
                f.end - start,
                at(start),
                f.free,
                f.commit
            ),
        });
    }

    /// The outermost commit of thread `tid`'s transaction at entry `index`: its new objects
    /// must be initialised by now, and its frees are final.
    pub fn commit(
        &mut self,
        (tid, index): (u32, u64),
        at: impl Fn(u64) -> String,
        out: &mut Vec<Breach>,
    ) {
        for f in self.fresh.iter().filter(|f| f.tid == tid) {
            let Some(&(start, end)) = f.unstored.first() else {
                continue;
            };
            let bytes: u64 = f.unstored.iter().map(|(s, e)| e - s).sum();
            out.push(Breach {
                kind: Kind::TxUninitialisedAlloc,
                addr: Some(f.start),
                meta: f.site.clone(),
                detail: format!(
                    "{bytes} bytes of the {}-byte object allocated here at {} were never \
                     stored before the transaction committed (entry {index}; the first are \
                     its bytes {:#x}..{:#x}): initialise them in the transaction, or allocate \
                     with pmemobj_tx_zalloc",
                    f.end - f.start,
                    at(f.start),
                    start - f.start,
                    end - f.start
                ),
            });
        }
        self.fresh.retain(|f| f.tid != tid);
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.freeing)
            .into_iter()
            .partition(|(t, _, _)| *t == tid);
        self.freeing = others;
        let committed = mine
            .into_iter()
            .map(|(_, start, f)| (start, Freed { commit: index, ..f }));
        self.freed.extend(committed);
    }

    /// The end of thread `tid`'s outermost transaction: what it did not commit is undone.
    pub fn end(&mut self, tid: u32) {
        self.fresh.retain(|f| f.tid != tid);
        self.freeing.retain(|(t, _, _)| *t != tid);
        self.calls.remove(&tid);
    }
}

/// Takes [start, end) out of the ranges `parts`, in place: stores come by the million, and
/// most touch no part or cut one.
fn cut(parts: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    let mut i = 0;
    while i < parts.len() {
        let (s, e) = parts[i];
        if end <= s || start >= e {
            i += 1;
            continue;
        }
        match (s < start, end < e) {
            (true, true) => {
                parts[i].1 = start;
                parts.insert(i + 1, (end, e));
                i += 2;
            }
            (true, false) => {
                parts[i].1 = start;
                i += 1;
            }
            (false, true) => {
                parts[i].0 = end;
                i += 1;
            }
            (false, false) => {
                parts.remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmdk_rules::uncovered;

    #[test]
    fn a_cut_takes_its_range_out_of_the_parts() {
        let mut parts = vec![(0x10, 0x20), (0x30, 0x40)];
        cut(&mut parts, 0x14, 0x18);
        assert_eq!(parts, [(0x10, 0x14), (0x18, 0x20), (0x30, 0x40)]);
        cut(&mut parts, 0x00, 0x12);
        cut(&mut parts, 0x1c, 0x34);
        assert_eq!(parts, [(0x12, 0x14), (0x18, 0x1c), (0x34, 0x40)]);
        cut(&mut parts, 0x12, 0x40);
        assert_eq!(parts, []);
        for (s, e) in [(0x10, 0x20), (0x0, 0x8)] {
            let mut parts = vec![(0x10, 0x20)];
            cut(&mut parts, s, e);
            assert_eq!(parts, uncovered(0x10, 0x20, &[(s, e)]));
        }
    }
}
