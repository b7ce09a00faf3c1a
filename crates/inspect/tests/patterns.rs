//! Trace patterns: one hand-written trace per pattern, the bundled journal examples, and
//! the ring buffer's own traces.

use persim_inspect::{find_patterns, Finding, Owner, PatternKind as Kind, Patterns};
use persim_model::CacheMode;
use persim_trace::Reader;
use std::path::Path;

fn scan(text: &str, cache: CacheMode) -> Patterns {
    let reader = Reader::new(std::io::Cursor::new(text.as_bytes().to_vec())).unwrap();
    find_patterns(reader, cache, None).unwrap()
}

fn example(name: &str) -> Patterns {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    find_patterns(Reader::open(&path).unwrap(), CacheMode::Volatile, None).unwrap()
}

/// The only finding of a trace: of `kind`, at entry `index` and code `pc`, its detail
/// starting with `detail`.
fn only_at<'a>(p: &'a Patterns, kind: Kind, (index, pc): (u64, u64), detail: &str) -> &'a Finding {
    let f = only(p);
    assert_eq!((f.kind, f.index, f.pc), (kind, index, Some(pc)));
    assert!(f.detail.starts_with(detail), "{}", f.detail);
    f
}

/// Asserts that a trace has no finding.
fn none(p: &Patterns) {
    let all: Vec<&Finding> = p.examples().collect();
    assert!(all.is_empty(), "{}", p.to_text(None, &[Owner::Program]));
}

/// The only finding of a trace, which must have exactly one.
fn only(p: &Patterns) -> &Finding {
    let all: Vec<&Finding> = p.examples().collect();
    assert_eq!(all.len(), 1, "{}", p.to_text(None, &[Owner::Program]));
    all[0]
}

#[test]
fn each_pattern_is_found_where_it_is() {
    // (trace, kind, entry index, line)
    let cases: [(&str, Kind, u64, Option<u64>); 6] = [
        (
            "write 0x40 01 @ pc=0x10\nflush clwb 0x40\nflush clwb 0x40 @ pc=0x20\nfence sfence\n",
            Kind::RedundantFlush,
            2,
            Some(0x40),
        ),
        (
            "write 0x0 01\nflush clwb 0x0\nfence sfence\nfence mfence @ pc=0x30\n",
            Kind::RedundantFence,
            3,
            None,
        ),
        (
            "write 0x80 0102 @ pc=0x40\nhypercall checkpoint 1\n",
            Kind::MissingPersist,
            1,
            Some(0x80),
        ),
        (
            "write 0x0 01\nwrite 0x0 02 @ pc=0x50\nflush clwb 0x0\nfence sfence\n",
            Kind::OverwriteUnpersisted,
            1,
            Some(0x0),
        ),
        (
            "write 0x0 01\nwrite 0x40 01\nflush clwb 0x0\nflush clwb 0x40\nfence sfence @ pc=0x60\n",
            Kind::UnorderedFlushes,
            4,
            None,
        ),
        (
            "flush clflushopt 0x100 @ pc=0x70\nfence sfence\n",
            Kind::FlushUnwritten,
            0,
            Some(0x100),
        ),
    ];
    for (trace, kind, index, line) in cases {
        let p = scan(trace, CacheMode::Volatile);
        let f = only(&p);
        assert_eq!((f.kind, f.index, f.line), (kind, index, line), "{trace}");
        assert_eq!(p.count(kind), 1);
        assert!(f.pc.is_some(), "the code behind it: {f:?}");
    }
}

#[test]
fn missing_persist_names_the_uncovered_bytes_and_the_last_store() {
    // 0x8..0x10 flushed and fenced; 0x20..0x28 written after the flush
    let p = scan(
        "write 0x8 0102030405060708\nflush clwb 0x0\nfence sfence\n\
         write 0x20 0102030405060708 @ pc=0x99\nhypercall success\n",
        CacheMode::Volatile,
    );
    let f = only(&p);
    assert_eq!(
        (f.kind, f.index, f.pc),
        (Kind::MissingPersist, 4, Some(0x99))
    );
    assert!(
        f.detail.contains("0x20..0x28") && f.detail.contains("at success"),
        "{f:?}"
    );
    // reported once, not again at the end of the trace
    assert_eq!(p.count(Kind::MissingPersist), 1);
}

#[test]
fn nt_stores_need_a_fence_and_persistent_caches_need_no_flush() {
    let nt = "ntwrite 0x0 0102030405060708\nhypercall checkpoint 1\n";
    assert_eq!(
        only(&scan(nt, CacheMode::Volatile)).kind,
        Kind::MissingPersist
    );
    let fenced = "ntwrite 0x0 0102030405060708\nfence sfence\nhypercall checkpoint 1\n";
    assert_eq!(
        scan(fenced, CacheMode::Volatile).count(Kind::MissingPersist),
        0
    );
    let cached = "write 0x0 01\nfence sfence\nhypercall checkpoint 1\n";
    assert_eq!(
        scan(cached, CacheMode::Volatile).count(Kind::MissingPersist),
        1
    );
    let eadr = scan(cached, CacheMode::Persistent);
    assert_eq!(
        eadr.count(Kind::MissingPersist),
        0,
        "{}",
        eadr.to_text(None, &[Owner::Program])
    );
    let flushed = "write 0x0 01\nflush clwb 0x0\nfence sfence\n";
    assert_eq!(
        only(&scan(flushed, CacheMode::Persistent)).kind,
        Kind::RedundantFlush
    );
}

#[test]
fn a_store_across_two_lines_is_judged_per_line() {
    let p = scan(
        "write 0x3c 0102030405060708\nflush clwb 0x0\nfence sfence\nhypercall checkpoint 1\n",
        CacheMode::Volatile,
    );
    let f = only(&p);
    assert_eq!((f.kind, f.line), (Kind::MissingPersist, Some(0x40)));
    assert!(f.detail.contains("0x0..0x4"), "{f:?}");
}

#[test]
fn the_correct_journal_is_clean_and_the_missing_fence_shows() {
    let clean = example("journal.trace");
    let total: u64 = clean.counts.values().sum();
    assert_eq!(total, 0, "{}", clean.to_text(None, &[Owner::Program]));
    let broken = example("journal-missing-fence.trace");
    let f = only(&broken);
    // the log and the commit flag are flushed together: nothing orders them
    assert_eq!(
        (f.kind, f.index),
        (Kind::UnorderedFlushes, 7),
        "{}",
        broken.to_text(None, &[Owner::Program])
    );
}

/// A timer interrupt where the journal's fence is missing orders nothing of the program's:
/// the unordered flushes still show.
#[test]
fn an_interrupt_where_a_fence_is_missing_hides_nothing() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/journal-missing-fence.trace");
    let text = std::fs::read_to_string(path).unwrap();
    let interrupted = text.replace("flush clwb 0x0\n", "flush clwb 0x0\nfence interrupt\n");
    assert_ne!(interrupted, text);
    let f = only(&scan(&interrupted, CacheMode::Volatile)).clone();
    assert_eq!(f.kind, Kind::UnorderedFlushes);
}

#[test]
fn counts_group_by_call_site_and_json_names_kinds() {
    let p = scan(
        "fence sfence @ pc=0x1\nfence sfence @ pc=0x1\nfence sfence @ pc=0x2\n",
        CacheMode::Volatile,
    );
    assert_eq!(p.count(Kind::RedundantFence), 3);
    let sites: Vec<(Option<u64>, u64)> = p.sites.iter().map(|s| (s.pc, s.count)).collect();
    assert_eq!(sites, [(Some(1), 2), (Some(2), 1)]);
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["counts"]["redundant-fence"], 3);
    assert_eq!(json["sites"][0]["kind"], "redundant-fence");
    assert!(p
        .to_text(None, &[Owner::Program])
        .contains("redundant-fence at pc=0x1: 2"));
    let symbols = persim_trace::Symbols::from_kallsyms("0000000000000001 t journal_commit\n");
    assert!(p
        .to_text(Some(&symbols), &[Owner::Program])
        .contains("redundant-fence at pc=0x1 (journal_commit+0x0): 2"));
}

/// PMDK's rules on hand-made traces with call entries (no symbols: every user-space store
/// is the application's). Each buggy trace has its one finding; the fixed one none.
#[test]
fn pmdk_rules_find_the_missing_call_and_nothing_in_the_fixed_programs() {
    let tx = |add: &str| {
        format!(
            "call pmemobj_tx_begin pm:0x1000 0x7ffc0000 @ pc=0x7f0000 stack=0x401000\n\
             {add}\
             write 0x1010 0a00000000000000 @ pc=0x401010\n\
             call pmemobj_tx_commit @ pc=0x7f0100 stack=0x401020\n\
             call pmemobj_tx_end @ pc=0x7f0200 stack=0x401030\n\
             flush clwb 0x1010\nfence sfence\nhypercall success\n"
        )
    };
    let unlogged = scan(&tx(""), CacheMode::Volatile);
    let f = only(&unlogged);
    assert_eq!(
        (f.kind, f.index, f.pc),
        (Kind::TxUnloggedStore, 1, Some(0x401010))
    );
    assert!(
        f.detail
            .starts_with("add pmemobj_tx_add_range for 8 bytes at pool+0x10 before this store"),
        "{}",
        f.detail
    );
    // added directly, or through its PMEMoid (object at 0x1000, field at +0x10)
    for add in [
        "call pmemobj_tx_add_range_direct pm:0x1010 0x8 @ pc=0x7f0300 stack=0x401008\n",
        "call pmemobj_tx_add_range 0x55 pm:0x1000 0x10 0x8 @ pc=0x7f0400 stack=0x401008\n",
    ] {
        let logged = scan(&tx(add), CacheMode::Volatile);
        none(&logged);
    }
    // a store of the library itself (a kernel pc here) is never judged
    let library = tx("").replace("@ pc=0x401010", "@ pc=0xffffffff81000000");
    assert_eq!(
        scan(&library, CacheMode::Volatile).count(Kind::TxUnloggedStore),
        0
    );

    let persist = |addr: &str, len: u64| {
        format!(
            "write 0x2000 0700000000000000 @ pc=0x402000\n\
             write 0x2008 0500000000000000 @ pc=0x402008\n\
             write 0x2010 73657665 @ pc=0x402010\n\
             call pmemobj_persist pm:0x1000 {addr} {len:#x} @ pc=0x7f0500 stack=0x402020\n\
             flush clwb 0x2000\nfence sfence\nhypercall success\n"
        )
    };
    let stack = scan(&persist("0x7ffc0010", 20), CacheMode::Volatile);
    let f = stack
        .examples()
        .find(|f| f.kind == Kind::FlushNotPm)
        .expect("flush-not-pm");
    assert_eq!((f.index, f.pc), (3, Some(0x402020)), "at the call site");
    assert!(
        f.detail.contains("0x7ffc0010, which is not PM"),
        "{}",
        f.detail
    );
    let short = scan(&persist("pm:0x2000", 16), CacheMode::Volatile);
    let f = only(&short);
    assert_eq!(
        (f.kind, f.index, f.pc),
        (Kind::PersistShort, 6, Some(0x402010))
    );
    assert!(
        f.detail.starts_with("bytes 0x10..0x14 of line 0x2000"),
        "{}",
        f.detail
    );
    let whole = scan(&persist("pm:0x2000", 20), CacheMode::Volatile);
    none(&whole);
}

/// A transaction of the pool at 0x1000 around `body`, committed or (`commit` false) not,
/// then `after`.
fn pmdk_tx(body: &str, commit: bool, after: &str) -> String {
    let commit = if commit {
        "call pmemobj_tx_commit @ pc=0x7f0100 stack=0x401020\n"
    } else {
        ""
    };
    format!(
        "call pmemobj_tx_begin pm:0x1000 0x7ffc0000 @ pc=0x7f0000 stack=0x401000\n\
         {body}{commit}\
         call pmemobj_tx_end @ pc=0x7f0200 stack=0x401030\n\
         {after}flush clwb 0x1100\nfence sfence\nhypercall success\n"
    )
}

/// A transaction's second store to bytes it added overwrites them before they are durable,
/// which is what its undo log is for: no finding. The same stores without the transaction
/// are one.
#[test]
fn a_transaction_may_overwrite_what_it_logged() {
    let add = "call pmemobj_tx_add_range_direct pm:0x1100 0x8 @ pc=0x7f0300 stack=0x401010\n";
    let twice = "write 0x1100 0700000000000000 @ pc=0x401050\n\
                 write 0x1100 0800000000000000 @ pc=0x401058\n";
    none(&scan(
        &pmdk_tx(&format!("{add}{twice}"), true, ""),
        CacheMode::Volatile,
    ));
    let plain = format!("{twice}flush clwb 0x1100\nfence sfence\nhypercall success\n");
    let f = only(&scan(&plain, CacheMode::Volatile)).clone();
    assert_eq!(f.kind, Kind::OverwriteUnpersisted);
}

/// An allocation of 24 bytes at 0x1100 in a transaction, called from 0x401040.
const ALLOC: &str = "call pmemobj_tx_alloc 0x18 0x1 @ pc=0x7f0600 stack=0x401040\n\
                     return pmemobj_tx_alloc pm:0x1100 @ pc=0x401040\n";

/// Rule 3, and rule 2's false positive fixed: a transaction's stores to the object it
/// allocated need no add; bytes of it never stored by the commit are reported at the
/// allocation, unless they were zeroed.
#[test]
fn pmdk_new_objects_need_no_add_but_every_byte_stored_before_commit() {
    let part = "write 0x1100 0700000000000000 @ pc=0x401050\n";
    let p = scan(
        &pmdk_tx(&format!("{ALLOC}{part}"), true, ""),
        CacheMode::Volatile,
    );
    let f = only(&p);
    assert_eq!(
        (f.kind, f.index, f.pc, f.addr),
        (Kind::TxUninitialisedAlloc, 4, Some(0x401040), Some(0x1100))
    );
    assert!(
        f.detail.starts_with(
            "16 bytes of the 24-byte object allocated here at pool+0x100 were never stored"
        ),
        "{}",
        f.detail
    );
    let whole = format!(
        "{part}write 0x1108 0500000000000000 @ pc=0x401058\n\
         write 0x1110 0500000000000000 @ pc=0x401060\n"
    );
    for body in [
        format!("{ALLOC}{whole}"),
        ALLOC.replace("tx_alloc", "tx_zalloc") + part,
        // pmemobj_tx_xalloc with POBJ_XALLOC_ZERO
        ALLOC
            .replace("tx_alloc 0x18 0x1", "tx_xalloc 0x18 0x1 0x1")
            .replace("tx_alloc", "tx_xalloc")
            + part,
    ] {
        let p = scan(&pmdk_tx(&body, true, ""), CacheMode::Volatile);
        assert_eq!(
            p.examples().count(),
            0,
            "{body}\n{}",
            p.to_text(None, &[Owner::Program])
        );
    }
    // without the allocation's return the same store is an unlogged one (the old false
    // positive), and an aborted transaction's object is undone, not judged
    let no_return = ALLOC.lines().next().unwrap().to_owned() + "\n" + part;
    let p = scan(&pmdk_tx(&no_return, true, ""), CacheMode::Volatile);
    assert_eq!(only(&p).kind, Kind::TxUnloggedStore);
    let p = scan(
        &pmdk_tx(&format!("{ALLOC}{part}"), false, ""),
        CacheMode::Volatile,
    );
    none(&p);
}

/// Rule 4: a load or store to an object after the transaction that freed it committed.
#[test]
fn pmdk_an_object_freed_by_a_committed_transaction_is_not_used() {
    let made = pmdk_tx(
        &format!("{ALLOC}write 0x1100 {} @ pc=0x401050\n", "07".repeat(24)),
        true,
        "",
    )
    .replace("flush clwb 0x1100\nfence sfence\nhypercall success\n", "");
    let free = "call pmemobj_tx_free 0x55 pm:0x1100 @ pc=0x7f0700 stack=0x402000\n";
    let read = "read 0x1108 8 @ pc=0x402010 stack=0x400100\n";
    let p = scan(
        &(made.clone() + &pmdk_tx(free, true, read)),
        CacheMode::Volatile,
    );
    let f = only(&p);
    assert_eq!(
        (f.kind, f.pc, f.addr),
        (Kind::UseAfterFree, Some(0x402010), Some(0x1108))
    );
    assert!(
        f.detail.starts_with(
            "load of 8 bytes at pool+0x108 in the 24-byte object at pool+0x100 that \
             pmemobj_tx_free freed (entry 7, committed at entry 8)"
        ),
        "{}",
        f.detail
    );
    let store = read.replace("read 0x1108 8", "write 0x1110 01");
    let p = scan(
        &(made.clone() + &pmdk_tx(free, true, &store)),
        CacheMode::Volatile,
    );
    assert_eq!(
        p.count(Kind::UseAfterFree),
        1,
        "{}",
        p.to_text(None, &[Owner::Program])
    );
    // read before the free, in an aborted transaction's free, or after the bytes were
    // allocated again: no finding
    for trace in [
        made.clone() + &pmdk_tx(&format!("{read}{free}"), true, ""),
        made.clone() + &pmdk_tx(free, false, read),
        made.clone() + &pmdk_tx(free, true, "") + &pmdk_tx(ALLOC, true, read),
    ] {
        let p = scan(&trace, CacheMode::Volatile);
        let uaf = p.count(Kind::UseAfterFree);
        assert_eq!(uaf, 0, "{trace}\n{}", p.to_text(None, &[Owner::Program]));
    }
    // an object allocated before the trace: its size is the one the tracer read from its
    // allocation header, the free's third argument (the header's size wins over the
    // allocation's, whose request it rounds up); without it the free is not judged
    let sized = free.replace("pm:0x1100", "pm:0x1100 0x30");
    let late = read.replace("0x1108 8", "0x1128 8");
    for (trace, found) in [
        (pmdk_tx(&sized, true, &late), 1),
        (made.clone() + &pmdk_tx(&sized, true, &late), 1),
        (pmdk_tx(free, true, &late), 0),
    ] {
        let p = scan(&trace, CacheMode::Volatile);
        let uaf = p.count(Kind::UseAfterFree);
        assert_eq!(
            uaf,
            found,
            "{trace}\n{}",
            p.to_text(None, &[Owner::Program])
        );
    }
}

/// Rule 5: two threads' open transactions adding overlapping bytes; one after the other
/// is fine.
#[test]
fn pmdk_open_transactions_of_two_threads_add_no_byte_twice() {
    let thread =
        |tid: u32, pc: u64| format!("@ pc={pc:#x} stack=0x{tid}01000 pid=50 tid={tid} comm=w");
    let begin = |tid| {
        format!(
            "call pmemobj_tx_begin pm:0x1000 0x0 {}\n",
            thread(tid, 0x7f0000)
        )
    };
    let add = |tid, at: u64| {
        format!(
            "call pmemobj_tx_add_range_direct pm:{at:#x} 0x8 {}\n",
            thread(tid, 0x7f0300)
        )
    };
    let end = |tid| {
        format!(
            "call pmemobj_tx_commit {}\ncall pmemobj_tx_end {}\n",
            thread(tid, 0x7f0100),
            thread(tid, 0x7f0200)
        )
    };
    let both_open = [
        begin(51),
        add(51, 0x1010),
        begin(52),
        add(52, 0x1014),
        end(52),
        end(51),
    ]
    .concat();
    let p = scan(&both_open, CacheMode::Volatile);
    let f = only(&p);
    assert_eq!(
        (f.kind, f.index, f.pc, f.addr),
        (Kind::TxOverlappingAdd, 3, Some(0x5201000), Some(0x1014))
    );
    assert!(
        f.detail.starts_with(
            "thread 52 adds 4 bytes at pool+0x14 that thread 51's open transaction (begun at \
             entry 0) added at entry 1"
        ),
        "{}",
        f.detail
    );
    let apart = [
        begin(51),
        add(51, 0x1010),
        begin(52),
        add(52, 0x1018),
        end(52),
        end(51),
    ]
    .concat();
    let after = [
        begin(51),
        add(51, 0x1010),
        end(51),
        begin(52),
        add(52, 0x1010),
        end(52),
    ]
    .concat();
    for trace in [apart, after] {
        let p = scan(&trace, CacheMode::Volatile);
        assert_eq!(
            p.examples().count(),
            0,
            "{trace}\n{}",
            p.to_text(None, &[Owner::Program])
        );
    }
}

/// A program (`prog`), libc's `memcpy`, PMDK's libraries and the kernel, for tests of whose
/// code a finding is in.
const OWNERS_SYMBOLS: &str = "\
0000000000401000 T main [prog]
0000000000402000 T insert [prog]
00007f0000000000 T memcpy [libc.so.6]
00007f1000001000 T pmemobj_open [libpmemobj.so.1]
00007f1000002000 T pmemobj_persist [libpmemobj.so.1]
00007f2000000000 T flush_clwb [libpmem.so.1]
00007f2000001000 T pmem_persist [libpmem.so.1]
00007f2000002000 T pmem_drain [libpmem.so.1]
ffffffff81000000 T arch_wb_cache_pmem
";

fn scan_with_symbols(text: &str) -> Patterns {
    let symbols = persim_trace::Symbols::from_kallsyms(OWNERS_SYMBOLS);
    let reader = Reader::new(std::io::Cursor::new(text.as_bytes().to_vec())).unwrap();
    find_patterns(reader, CacheMode::Volatile, Some(&symbols)).unwrap()
}

/// Issue 42, 9: libpmemobj's open leaves its run-time fields undurable and the kernel's
/// msync flushes lines nothing wrote, more findings than the program's one and earlier in
/// the trace; the program's comes first, in full, and the others are summarised apart. The
/// program's store and the library's go through the same `memcpy`: two sites.
#[test]
fn findings_are_ranked_by_whose_code_the_programs_first() {
    let trace = |program: &str| {
        format!(
            "write 0x1000 0100000000000000 @ pc=0x7f0000000010 stack=0x7f1000001010,0x401010\n\
             write 0x1040 0100000000000000 @ pc=0x7f0000000010 stack=0x7f1000001010,0x401010\n\
             flush clwb 0x3000 @ pc=0xffffffff81000010\n\
             flush clwb 0x3040 @ pc=0xffffffff81000010\n\
             flush clwb 0x3080 @ pc=0xffffffff81000010\n\
             fence sfence @ pc=0xffffffff81000020\n\
             write 0x2000 0700000000000000 @ pc=0x7f0000000010 stack=0x402010,0x401020\n\
             {program}hypercall success\n"
        )
    };
    let buggy = scan_with_symbols(&trace(""));
    let program = [Owner::Program];
    let text = buggy.to_text(None, &program);
    let owners: Vec<(Owner, Kind, u64)> = buggy
        .sites
        .iter()
        .map(|s| (s.owner, s.kind, s.count))
        .collect();
    assert_eq!(
        owners,
        [
            (Owner::Program, Kind::MissingPersist, 1),
            (Owner::Library, Kind::MissingPersist, 2),
            (Owner::Kernel, Kind::FlushUnwritten, 3),
        ],
        "{text}"
    );
    assert_eq!(buggy.count(Kind::MissingPersist), 3);
    assert_eq!(buggy.count_in(Kind::MissingPersist, &program), 1);
    assert_eq!(buggy.count_in(Kind::FlushUnwritten, &program), 0);
    assert_eq!(buggy.count_in(Kind::FlushUnwritten, &[Owner::Kernel]), 3);

    let at = |text: &str, what: &str| text.find(what).unwrap_or_else(|| panic!("{what}:\n{text}"));
    let mine = at(&text, "\n1 finding in the program's code:\n");
    let example = at(&text, "entry 7 addr 0x2000");
    let library = at(
        &text,
        "\n2 findings in PMDK's libraries' code, summarised (--code library",
    );
    let kernel = at(
        &text,
        "\n3 findings in the kernel's code, summarised (--code kernel",
    );
    assert!(
        mine < example && example < library && library < kernel,
        "{text}"
    );
    assert!(
        !text[library..].contains("entry "),
        "summaries have no examples:\n{text}"
    );
    assert!(
        text.contains("  flush-unwritten at pc=0xffffffff81000010: 3\n"),
        "{text}"
    );
    let copy = "  missing-persist at pc=0x7f0000000010: 2\n    stack 0x7f1000001010 < 0x401010\n";
    assert!(
        text.contains(copy),
        "the library's function behind the copy:\n{text}"
    );
    let row = |first: &str| -> Vec<&str> {
        let line = text.lines().find(|l| l.trim_start().starts_with(first));
        line.expect(first).split_whitespace().collect()
    };
    assert_eq!(
        row("pattern "),
        ["pattern", "total", "program", "library", "kernel"]
    );
    assert_eq!(
        row("missing-persist "),
        ["missing-persist", "3", "1", "2", "0"]
    );
    // asked for, the library's and the kernel's are in full, still after the program's
    let all = buggy.to_text(None, &[Owner::Program, Owner::Library, Owner::Kernel]);
    assert!(all.contains("entry 2 addr 0x3000"), "{all}");
    assert!(
        at(&all, "entry 7 addr 0x2000") < at(&all, "entry 7 addr 0x1000"),
        "{all}"
    );

    // a file system's view: the kernel's first, in full; the program's summarised
    let kernel = buggy.to_text(None, &[Owner::Kernel]);
    let full = at(&kernel, "\n3 findings in the kernel's code:\n");
    let summary = "\n1 finding in the program's code, summarised (--code program";
    assert!(full < at(&kernel, summary), "{kernel}");
    // code of no recorded pc is judged, and is not the program's to be clean
    let anyone = scan(
        "write 0x80 0102\nhypercall checkpoint 1\n",
        CacheMode::Volatile,
    );
    let text = anyone.to_text(None, &program);
    assert!(
        text.contains("\n1 finding in code of no recorded pc:\n"),
        "{text}"
    );
    assert!(!text.contains("no finding"), "{text}");

    let json = serde_json::to_value(&buggy).unwrap();
    assert_eq!(json["sites"][0]["owner"], "program");
    assert_eq!(json["by_owner"]["kernel"]["flush-unwritten"], 3);
    assert_eq!(json["by_owner"]["library"]["missing-persist"], 2);

    // The program persists its store: it reads clean, before the others' summaries.
    let correct = scan_with_symbols(&trace(
        "flush clwb 0x2000 @ pc=0x402020 stack=0x401020\nfence sfence @ pc=0x402024\n",
    ));
    let text = correct.to_text(None, &program);
    assert_eq!(correct.by_owner.get(&Owner::Program), None, "{text}");
    let clean = at(&text, "\nno finding in the program's code\n");
    assert!(
        clean < at(&text, "findings in PMDK's libraries' code"),
        "{text}"
    );
}

/// Issue 42, 10: a persist of lines with no store since their last flush. Its flush
/// instructions are libpmem's (without the call entries the generic rule finds the
/// library's, which is why the program's never showed); with them, the program's call
/// site, once.
#[test]
fn a_programs_persist_of_lines_it_did_not_store_to_since_is_redundant() {
    let trace = |between: &str, calls: bool| {
        let text = format!(
            "write 0x2000 0700000000000000 @ pc=0x402000 stack=0x401010\n\
             call pmemobj_persist pm:0x1000 pm:0x2000 0x8 @ pc=0x7f1000002000 stack=0x402010\n\
             flush clwb 0x2000 @ pc=0x7f2000000010 stack=0x7f1000002010,0x402010\n\
             fence sfence @ pc=0x7f2000000020 stack=0x7f1000002010,0x402010\n\
             {between}\
             call pmemobj_persist pm:0x1000 pm:0x2000 0x8 @ pc=0x7f1000002000 stack=0x402020\n\
             flush clwb 0x2000 @ pc=0x7f2000000010 stack=0x7f1000002010,0x402020\n\
             fence sfence @ pc=0x7f2000000020 stack=0x7f1000002010,0x402020\n\
             hypercall success\n"
        );
        match calls {
            true => text,
            false => text
                .lines()
                .filter(|l| !l.starts_with("call "))
                .map(|l| format!("{l}\n"))
                .collect(),
        }
    };
    let twice = scan_with_symbols(&trace("", true));
    let detail = "pmemobj_persist of 8 bytes at 0x2000: no store to its 1 line(s)";
    let f = only_at(&twice, Kind::RedundantFlush, (4, 0x402020), detail);
    assert_eq!(f.addr, Some(0x2000));
    assert_eq!(twice.sites[0].owner, Owner::Program);
    let generic = [(Owner::Library, Kind::RedundantFlush, Some(0x7f2000000010))];
    let sites = |p: &Patterns| -> Vec<(Owner, Kind, Option<u64>)> {
        p.sites.iter().map(|s| (s.owner, s.kind, s.pc)).collect()
    };
    assert_eq!(sites(&scan_with_symbols(&trace("", false))), generic);
    // the library's own persist call (pmemobj_persist calling pmem_persist) is not judged
    let by_library = trace("", true).replace("stack=0x402020\n", "stack=0x7f1000002010,0x402020\n");
    assert_eq!(sites(&scan_with_symbols(&by_library)), generic);

    let stored = "write 0x2004 08 @ pc=0x402018 stack=0x401010\n";
    let p = scan_with_symbols(&trace(stored, true));
    none(&p);
}

/// Issue 42, 10: `pmem_drain` with nothing flushed or stored since the last fence.
#[test]
fn a_programs_drain_with_nothing_to_wait_for_is_redundant() {
    let trace = |persist: &str| {
        format!(
            "write 0x2000 0700000000000000 @ pc=0x402000 stack=0x401010\n\
             {persist}\
             call pmem_drain @ pc=0x7f2000002000 stack=0x402020\n\
             fence sfence @ pc=0x7f2000000020 stack=0x7f2000002010,0x402020\n\
             hypercall success\n"
        )
    };
    let persisted = "call pmem_persist pm:0x2000 0x8 @ pc=0x7f2000001000 stack=0x402010\n\
                     flush clwb 0x2000 @ pc=0x7f2000000010 stack=0x7f2000001010,0x402010\n\
                     fence sfence @ pc=0x7f2000000020 stack=0x7f2000001010,0x402010\n";
    let p = scan_with_symbols(&trace(persisted));
    let detail = "pmem_drain with nothing to wait for";
    only_at(&p, Kind::RedundantFence, (4, 0x402020), detail);
    let flushed = "call pmem_flush pm:0x2000 0x8 @ pc=0x7f2000001000 stack=0x402010\n\
                   flush clwb 0x2000 @ pc=0x7f2000000010 stack=0x7f2000001010,0x402010\n";
    let p = scan_with_symbols(&trace(flushed));
    none(&p);
}

/// Issue 42, 10: an add of bytes the open transaction added already, together or in
/// parts; an add that reaches past them, or the same add in the next transaction, is none.
#[test]
fn pmdk_an_add_of_bytes_the_transaction_added_already_is_a_duplicate() {
    let adds = |third: &str| {
        format!(
            "call pmemobj_tx_add_range_direct pm:0x1100 0x4 @ pc=0x7f0300 stack=0x401008\n\
             call pmemobj_tx_add_range_direct pm:0x1104 0x4 @ pc=0x7f0300 stack=0x401010\n\
             call pmemobj_tx_add_range 0x55 pm:0x1100 0x0 {third} @ pc=0x7f0400 stack=0x401018\n\
             write 0x1100 0700000000000000 @ pc=0x401050\n"
        )
    };
    let p = scan(&pmdk_tx(&adds("0x8"), true, ""), CacheMode::Volatile);
    let detail = "pmemobj_tx_add_range of 8 bytes at pool+0x100 that the transaction (begun \
                  at entry 0) added already (at entry 1)";
    let f = only_at(&p, Kind::TxDuplicateAdd, (3, 0x401018), detail);
    assert_eq!(f.addr, Some(0x1100));
    let past = scan(&pmdk_tx(&adds("0x10"), true, ""), CacheMode::Volatile);
    none(&past);
    let once = "call pmemobj_tx_add_range_direct pm:0x1100 0x8 @ pc=0x7f0300 stack=0x401008\n\
                write 0x1100 0700000000000000 @ pc=0x401050\n";
    let tx = pmdk_tx(once, true, "");
    let p = scan(&format!("{tx}{tx}"), CacheMode::Volatile);
    none(&p);
}
