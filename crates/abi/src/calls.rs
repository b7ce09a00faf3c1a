//! Which functions the plugin records calls of (`--trace-calls`, docs/design/tracer.md "Library
//! calls"): the host finds each in the ELF files of the guest's programs and libraries and
//! writes a table that the plugin reads (`calls=PATH`). A function is known in the guest by
//! where its code sits in its page (libraries are mapped page-aligned) and by its first
//! bytes (position-independent code is the same in the file and in memory), so the plugin
//! needs no knowledge of the guest's address-space layout.

/// What the plugin does with a function's first arguments besides recording them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgRole {
    /// Plain arguments.
    Plain,
    /// The first argument is a `PMEMobjpool *`: the base the thread's PMEMoids are offsets
    /// from, from here on.
    Pool,
    /// The first two arguments are a `PMEMoid` (pool uuid, offset): the second is recorded as
    /// the object's address (the thread's pool base plus the offset).
    Oid,
    /// As [`ArgRole::Oid`], for an object being freed: the object's usable size, read from
    /// libpmemobj's allocation header in front of it, is recorded as one more argument
    /// (the rules need it when the object was allocated before the trace began).
    FreedOid,
}

/// What the plugin records of a function's return (a `return` entry, docs/reference/trace-format.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnRole {
    /// Nothing: the return is not watched (a void function, or an error code no rule reads).
    Ignored,
    /// rax, as an argument is recorded (`pm:` where it points into PM).
    Value,
    /// A `PMEMoid` in rax:rdx: the object's address (the thread's pool base plus rdx).
    Oid,
}

/// One function the plugin records calls of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracedFunction {
    pub name: String,
    /// The function's address modulo the page size.
    pub page_offset: u16,
    /// Argument registers recorded (rdi, rsi, rdx, rcx, r8, r9).
    pub args: u8,
    pub role: ArgRole,
    pub returns: ReturnRole,
    /// The function's first bytes (up to [`CODE_BYTES`]).
    pub code: Vec<u8>,
}

/// Bytes of a function's code compared: enough to tell it from any other function at the
/// same offset in its page.
pub const CODE_BYTES: usize = 32;

/// The built-in set, `--trace-calls pmdk`: libpmemobj's transactions, allocations and
/// persists, and libpmem's flushes, with their argument counts.
pub const PMDK: [(&str, u8, ArgRole, ReturnRole); 21] = [
    ("pmemobj_create", 4, ArgRole::Plain, ReturnRole::Value),
    ("pmemobj_open", 2, ArgRole::Plain, ReturnRole::Value),
    ("pmemobj_tx_begin", 2, ArgRole::Pool, ReturnRole::Ignored),
    ("pmemobj_tx_commit", 0, ArgRole::Plain, ReturnRole::Ignored),
    ("pmemobj_tx_end", 0, ArgRole::Plain, ReturnRole::Ignored),
    ("pmemobj_tx_abort", 1, ArgRole::Plain, ReturnRole::Ignored),
    ("pmemobj_tx_add_range", 4, ArgRole::Oid, ReturnRole::Ignored),
    (
        "pmemobj_tx_add_range_direct",
        2,
        ArgRole::Plain,
        ReturnRole::Ignored,
    ),
    (
        "pmemobj_tx_xadd_range",
        5,
        ArgRole::Oid,
        ReturnRole::Ignored,
    ),
    (
        "pmemobj_tx_xadd_range_direct",
        3,
        ArgRole::Plain,
        ReturnRole::Ignored,
    ),
    ("pmemobj_tx_alloc", 2, ArgRole::Plain, ReturnRole::Oid),
    ("pmemobj_tx_zalloc", 2, ArgRole::Plain, ReturnRole::Oid),
    ("pmemobj_tx_xalloc", 3, ArgRole::Plain, ReturnRole::Oid),
    ("pmemobj_tx_free", 2, ArgRole::FreedOid, ReturnRole::Ignored),
    ("pmemobj_persist", 3, ArgRole::Pool, ReturnRole::Ignored),
    ("pmemobj_flush", 3, ArgRole::Pool, ReturnRole::Ignored),
    ("pmemobj_direct", 2, ArgRole::Oid, ReturnRole::Value),
    ("pmem_persist", 2, ArgRole::Plain, ReturnRole::Ignored),
    ("pmem_flush", 2, ArgRole::Plain, ReturnRole::Ignored),
    ("pmem_msync", 2, ArgRole::Plain, ReturnRole::Ignored),
    ("pmem_drain", 0, ArgRole::Plain, ReturnRole::Ignored),
];

/// The name that stands for [`PMDK`] in `--trace-calls`.
pub const PMDK_SET: &str = "pmdk";

impl ArgRole {
    fn name(self) -> &'static str {
        match self {
            ArgRole::Plain => "-",
            ArgRole::Pool => "pool",
            ArgRole::Oid => "oid",
            ArgRole::FreedOid => "freed-oid",
        }
    }
}

impl ReturnRole {
    fn name(self) -> &'static str {
        match self {
            ReturnRole::Ignored => "-",
            ReturnRole::Value => "value",
            ReturnRole::Oid => "oid",
        }
    }
}

/// The table's text: one function per line, `NAME PAGE_OFFSET ARGS ROLE RETURN HEXCODE`.
pub fn write_table(functions: &[TracedFunction]) -> String {
    let mut text = String::new();
    for f in functions {
        let code: String = f.code.iter().map(|b| format!("{b:02x}")).collect();
        text += &format!(
            "{} {:#x} {} {} {} {code}\n",
            f.name,
            f.page_offset,
            f.args,
            f.role.name(),
            f.returns.name()
        );
    }
    text
}

/// Reads what [`write_table`] wrote.
pub fn parse_table(text: &str) -> Result<Vec<TracedFunction>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let bad = || format!("bad call table line `{line}`");
            let f: Vec<&str> = line.split_whitespace().collect();
            let [name, offset, args, role, returns, code] = f[..] else {
                return Err(bad());
            };
            let page_offset = offset
                .strip_prefix("0x")
                .and_then(|h| u16::from_str_radix(h, 16).ok())
                .filter(|o| *o < 4096)
                .ok_or_else(bad)?;
            let role = [
                ArgRole::Plain,
                ArgRole::Pool,
                ArgRole::Oid,
                ArgRole::FreedOid,
            ]
            .into_iter()
            .find(|r| r.name() == role)
            .ok_or_else(bad)?;
            let returns = [ReturnRole::Ignored, ReturnRole::Value, ReturnRole::Oid]
                .into_iter()
                .find(|r| r.name() == returns)
                .ok_or_else(bad)?;
            let code = (0..code.len() / 2)
                .map(|i| u8::from_str_radix(code.get(2 * i..2 * i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()
                .filter(|c| !c.is_empty() && c.len() * 2 == code.len())
                .ok_or_else(bad)?;
            Ok(TracedFunction {
                name: name.to_owned(),
                page_offset,
                args: args.parse().ok().filter(|n| *n <= 6).ok_or_else(bad)?,
                role,
                returns,
                code,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_back_and_a_bad_line_is_refused() {
        let table = vec![
            TracedFunction {
                name: "pmemobj_tx_add_range".into(),
                page_offset: 0x4b0,
                args: 4,
                role: ArgRole::Oid,
                returns: ReturnRole::Ignored,
                code: vec![0xf3, 0x0f, 0x1e, 0xfa],
            },
            TracedFunction {
                name: "my_fn".into(),
                page_offset: 0,
                args: 0,
                role: ArgRole::Plain,
                returns: ReturnRole::Oid,
                code: vec![0xc3],
            },
            TracedFunction {
                name: "pmemobj_tx_free".into(),
                page_offset: 0x10,
                args: 2,
                role: ArgRole::FreedOid,
                returns: ReturnRole::Ignored,
                code: vec![0xc3],
            },
        ];
        assert_eq!(parse_table(&write_table(&table)), Ok(table));
        for bad in [
            "f 0x1000 2 - - c3",
            "f 0x10 7 - - c3",
            "f 0x10 2 x - c3",
            "f 0x10 2 - x c3",
            "f 0x10 2 - c3",
            "f 0x10 2 - - c",
        ] {
            assert!(parse_table(bad).is_err(), "{bad}");
        }
    }
}
