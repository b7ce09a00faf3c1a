//! Recording calls of named functions (`persim_abi::calls`, docs/design/tracer.md "Library
//! calls"): which translated instruction starts a traced function, what its arguments
//! are, and which `ret` is its return. QEMU-independent; the glue reads the registers and
//! translates the addresses.

use persim_abi::calls::{ArgRole, ReturnRole, TracedFunction};
use std::collections::HashMap;

const PAGE: u64 = 4096;
/// Above this, an argument is no user-space address (x86-64's lower half, 4-level paging).
const USER_END: u64 = 1 << 47;

pub struct CallTable {
    functions: Vec<TracedFunction>,
    /// Functions by their offset in the page: most instructions are no candidate at all.
    by_offset: HashMap<u16, Vec<usize>>,
    /// The pool base of each address space (by cr3), from the last `Pool` call in it:
    /// PMEMoids are offsets from it.
    pools: HashMap<u64, u64>,
}

impl CallTable {
    pub fn new(functions: Vec<TracedFunction>) -> CallTable {
        let mut by_offset: HashMap<u16, Vec<usize>> = HashMap::new();
        for (i, f) in functions.iter().enumerate() {
            by_offset.entry(f.page_offset).or_default().push(i);
        }
        CallTable {
            functions,
            by_offset,
            pools: HashMap::new(),
        }
    }

    /// The traced function that starts at user address `pc`, if any: one at the same
    /// offset in its page whose first bytes are the code there (`read` fills a buffer
    /// with the bytes at `pc`).
    pub fn function_at(&self, pc: u64, mut read: impl FnMut(&mut [u8]) -> bool) -> Option<usize> {
        let candidates = self.by_offset.get(&((pc % PAGE) as u16))?;
        let mut code = [0u8; persim_abi::calls::CODE_BYTES];
        candidates.iter().copied().find(|&i| {
            let want = &self.functions[i].code;
            let got = &mut code[..want.len()];
            read(got) && got == want.as_slice()
        })
    }

    pub fn name(&self, function: usize) -> &str {
        &self.functions[function].name
    }

    /// Whether any function's return is recorded: only then are `ret`s watched.
    pub fn watches_returns(&self) -> bool {
        self.functions
            .iter()
            .any(|f| f.returns != ReturnRole::Ignored)
    }

    pub fn returns(&self, function: usize) -> ReturnRole {
        self.functions[function].returns
    }

    /// The value a return of `function` in address space `cr3` records, from rax and rdx:
    /// a returned PMEMoid's offset (rdx) becomes the object's address.
    pub fn return_value(&self, function: usize, cr3: u64, rax: u64, rdx: u64) -> u64 {
        match (self.functions[function].returns, self.pools.get(&cr3)) {
            (ReturnRole::Oid, Some(&pool)) if rdx != 0 => pool.wrapping_add(rdx),
            (ReturnRole::Oid, _) => rdx,
            (ReturnRole::Value | ReturnRole::Ignored, _) => rax,
        }
    }

    /// The argument values of a call of `function` in address space `cr3`, from the
    /// argument registers: a PMEMoid's offset becomes the object's address (the pool's
    /// base plus the offset), and a pool argument sets the base. For an object being
    /// freed, also its usable size (`read` reads guest memory at an address), if its
    /// allocation header says.
    pub fn arguments(
        &mut self,
        function: usize,
        cr3: u64,
        registers: [u64; 6],
        read: impl FnMut(u64, &mut [u8]) -> bool,
    ) -> (Vec<u64>, Option<u64>) {
        let f = &self.functions[function];
        let mut args = registers[..usize::from(f.args)].to_vec();
        match f.role {
            ArgRole::Plain => {}
            ArgRole::Pool => {
                self.pools.insert(cr3, registers[0]);
            }
            ArgRole::Oid | ArgRole::FreedOid => {
                if let (Some(&pool), Some(off)) = (self.pools.get(&cr3), args.get_mut(1)) {
                    if *off != 0 {
                        *off = pool.wrapping_add(*off);
                        if f.role == ArgRole::FreedOid {
                            let size = usable_size(*off, read);
                            return (args, size);
                        }
                    }
                }
            }
        }
        (args, None)
    }
}

/// libpmemobj's compact allocation header, the 16 bytes in front of every object its
/// built-in allocation classes make (PMDK 1.3 on): the block's size, header included, in
/// the low 48 bits of its first word (flags above), then a word of the object's type.
const HEADER: u64 = 16;
const HEADER_SIZE_MASK: u64 = (1 << 48) - 1;

/// The usable size of the libpmemobj object at `object`: its block's size less the
/// header. None where the header cannot be read or holds no size beyond itself (a pool of
/// PMDK before 1.3, whose 64-byte legacy header has other fields there, or a user's class
/// without headers).
fn usable_size(object: u64, mut read: impl FnMut(u64, &mut [u8]) -> bool) -> Option<u64> {
    let mut word = [0u8; 8];
    if !read(object.checked_sub(HEADER)?, &mut word) {
        return None;
    }
    let block = u64::from_le_bytes(word) & HEADER_SIZE_MASK;
    (block > HEADER).then(|| block - HEADER)
}

/// A user stack: its address space (cr3) and thread pointer (fs_base), as the shadow
/// stacks name it.
pub type UserStack = (u64, u64);

/// The calls whose return is awaited: each by the stack slot its return address is in,
/// which the `ret` that returns from it pops. Nested and recursive calls have slots of
/// their own, and threads stacks of their own. A call left by `longjmp` (as
/// `pmemobj_tx_abort` does) is forgotten when its stack moves above its slot.
#[derive(Default)]
pub struct PendingReturns {
    pending: Vec<(UserStack, u64, usize)>,
}

/// Calls awaited at most: deeper recursion than this loses its outermost returns.
const MAX_PENDING: usize = 256;

impl PendingReturns {
    /// A call of `function` on `stack` whose return address is at `slot`.
    pub fn called(&mut self, stack: UserStack, slot: u64, function: usize) {
        // what was awaited on this stack at or below the slot was left without a return
        self.pending.retain(|&(s, at, _)| s != stack || at > slot);
        if self.pending.len() == MAX_PENDING {
            self.pending.remove(0);
        }
        self.pending.push((stack, slot, function));
    }

    /// A `ret` on `stack` that pops `slot`: the function it returns from, if awaited.
    pub fn returning(&mut self, stack: UserStack, slot: u64) -> Option<usize> {
        let mut function = None;
        self.pending.retain(|&(s, at, f)| {
            if s != stack || at > slot {
                return true;
            }
            if at == slot {
                function = Some(f);
            }
            false
        });
        function
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Whether an argument's value may be a user address worth translating.
pub fn may_be_address(value: u64) -> bool {
    (PAGE..USER_END).contains(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, page_offset: u16, role: ArgRole, code: &[u8]) -> TracedFunction {
        TracedFunction {
            name: name.into(),
            page_offset,
            args: 4,
            role,
            returns: ReturnRole::Oid,
            code: code.to_vec(),
        }
    }

    #[test]
    fn a_function_is_known_by_its_offset_in_the_page_and_its_first_bytes() {
        let table = CallTable::new(vec![
            function("a", 0x4b0, ArgRole::Plain, &[0xf3, 0x0f, 0x1e, 0xfa, 0x55]),
            function("b", 0x4b0, ArgRole::Plain, &[0xf3, 0x0f, 0x1e, 0xfa, 0x41]),
        ]);
        let memory = |bytes: &'static [u8]| {
            move |buf: &mut [u8]| {
                buf.copy_from_slice(&bytes[..buf.len()]);
                true
            }
        };
        let b = &[0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57];
        assert_eq!(table.function_at(0x7f12_3456_74b0, memory(b)), Some(1));
        assert_eq!(table.name(1), "b");
        // the same bytes elsewhere in a page, or other bytes at the offset, are no call
        assert_eq!(table.function_at(0x7f12_3456_74c0, memory(b)), None);
        let other = &[0xf3, 0x0f, 0x1e, 0xfa, 0x53, 0x57];
        assert_eq!(table.function_at(0x7f12_3456_74b0, memory(other)), None);
        assert_eq!(table.function_at(0x7f12_3456_74b0, |_| false), None);
    }

    #[test]
    fn an_oid_is_the_pool_base_of_its_address_space_plus_its_offset() {
        let mut table = CallTable::new(vec![
            function("begin", 0, ArgRole::Pool, &[0xc3]),
            function("add", 0, ArgRole::Oid, &[0xc3]),
        ]);
        let (cr3, other) = (0x1000, 0x2000);
        let args = |table: &mut CallTable, f: usize, cr3: u64, regs: [u64; 6]| {
            table.arguments(f, cr3, regs, no_memory).0
        };
        // before any pool is known the offset stays as it is
        assert_eq!(
            args(&mut table, 1, cr3, [7, 0x400, 8, 16, 0, 0]),
            [7, 0x400, 8, 16]
        );
        args(&mut table, 0, cr3, [0x7f00_0000_0000, 0, 0, 0, 0, 0]);
        assert_eq!(
            args(&mut table, 1, cr3, [7, 0x400, 8, 16, 0, 0]),
            [7, 0x7f00_0000_0400, 8, 16]
        );
        // OID_NULL stays null; another process has its own pool
        assert_eq!(args(&mut table, 1, cr3, [0, 0, 8, 16, 0, 0]), [0, 0, 8, 16]);
        assert_eq!(
            args(&mut table, 1, other, [7, 0x400, 8, 16, 0, 0])[1],
            0x400
        );
        assert!(may_be_address(0x7f00_0000_0400) && !may_be_address(40));
    }

    fn no_memory(_: u64, _: &mut [u8]) -> bool {
        false
    }

    #[test]
    fn a_freed_objects_size_is_its_compact_headers_block_size_less_the_header() {
        let mut table = CallTable::new(vec![
            function("begin", 0, ArgRole::Pool, &[0xc3]),
            function("free", 0, ArgRole::FreedOid, &[0xc3]),
        ]);
        let cr3 = 0x1000;
        table.arguments(0, cr3, [0x7f00_0000_0000, 0, 0, 0, 0, 0], no_memory);
        // a 128-byte block with flags in the top bits: 112 usable bytes
        let header = |at: u64, word: u64| {
            move |addr: u64, buf: &mut [u8]| {
                assert_eq!((addr, buf.len()), (at - 16, 8));
                buf.copy_from_slice(&word.to_le_bytes());
                true
            }
        };
        let object = 0x7f00_0000_0400;
        let freed = table.arguments(
            1,
            cr3,
            [7, 0x400, 0, 0, 0, 0],
            header(object, 3 << 48 | 128),
        );
        assert_eq!(freed, (vec![7, object, 0, 0], Some(112)));
        // a legacy header's root_size (0) there, an unreadable header, OID_NULL: no size
        assert_eq!(
            table
                .arguments(1, cr3, [7, 0x400, 0, 0, 0, 0], header(object, 0))
                .1,
            None
        );
        assert_eq!(
            table.arguments(1, cr3, [7, 0x400, 0, 0, 0, 0], no_memory).1,
            None
        );
        assert_eq!(
            table.arguments(1, cr3, [0, 0, 0, 0, 0, 0], no_memory),
            (vec![0, 0, 0, 0], None)
        );
    }

    #[test]
    fn a_returned_oid_is_the_object_and_a_returned_value_is_rax() {
        let mut table = CallTable::new(vec![
            function("begin", 0, ArgRole::Pool, &[0xc3]),
            TracedFunction {
                returns: ReturnRole::Value,
                ..function("direct", 0, ArgRole::Oid, &[0xc3])
            },
        ]);
        assert!(table.watches_returns());
        let cr3 = 0x1000;
        // no pool known yet: the offset as it is
        assert_eq!(table.return_value(0, cr3, 0xabc, 0x400), 0x400);
        table.arguments(0, cr3, [0x7f00_0000_0000, 0, 0, 0, 0, 0], no_memory);
        assert_eq!(table.return_value(0, cr3, 0xabc, 0x400), 0x7f00_0000_0400);
        assert_eq!(table.return_value(0, cr3, 0xabc, 0), 0, "OID_NULL");
        assert_eq!(table.return_value(1, cr3, 0xabc, 0x400), 0xabc);
        let ignored = TracedFunction {
            returns: ReturnRole::Ignored,
            ..function("persist", 0, ArgRole::Plain, &[0xc3])
        };
        assert!(!CallTable::new(vec![ignored]).watches_returns());
    }

    #[test]
    fn a_return_is_the_ret_through_its_calls_slot_on_its_own_stack() {
        let (main, worker) = ((0x1000, 0x7000), (0x1000, 0x8000));
        let mut p = PendingReturns::default();
        // nested: an outer call, and an inner one further down the same stack
        p.called(main, 0x7ff0, 0);
        p.called(main, 0x7f00, 1);
        // another thread's call at a lower address does not end main's
        p.called(worker, 0x6000, 2);
        // a ret of an untraced function in between is none of theirs
        assert_eq!(p.returning(main, 0x7e00), None);
        assert_eq!(p.returning(main, 0x7f00), Some(1));
        assert_eq!(p.returning(worker, 0x6000), Some(2));
        assert_eq!(p.returning(main, 0x7ff0), Some(0));
        assert!(p.is_empty());
        // recursion: the same function twice, each return its own
        p.called(main, 0x7ff0, 0);
        p.called(main, 0x7fa0, 0);
        assert_eq!(p.returning(main, 0x7fa0), Some(0));
        assert_eq!(p.returning(main, 0x7ff0), Some(0));
        // longjmp past a call: a ret above its slot forgets it
        p.called(main, 0x7f00, 1);
        assert_eq!(p.returning(main, 0x7f80), None);
        assert!(p.is_empty());
        // a new call through the slot of one never returned replaces it
        p.called(main, 0x7f00, 1);
        p.called(main, 0x7f00, 0);
        assert_eq!(p.returning(main, 0x7f00), Some(0));
        assert!(p.is_empty());
    }
}
