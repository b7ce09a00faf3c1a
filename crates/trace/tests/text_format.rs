//! The text form: what it accepts, and how each kind of bad line is reported.

use std::io::Cursor;

use persim_trace::{
    Arg, Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op, Reader, Task, TraceErrorKind,
};

fn parse(text: &str) -> (Header, Vec<Entry>) {
    let reader = Reader::new(Cursor::new(text.as_bytes().to_vec())).unwrap();
    let header = reader.header();
    let entries = reader.collect::<Result<_, _>>().unwrap();
    (header, entries)
}

/// The line, entry index and problem of the first error, with the quoted text.
fn first_error(text: &str) -> (u64, u64, String, String) {
    let err = match Reader::new(Cursor::new(text.as_bytes().to_vec())) {
        Ok(mut reader) => reader
            .find_map(Result::err)
            .expect("the trace has an error"),
        Err(e) => e,
    };
    let TraceErrorKind::Text {
        line,
        index,
        text,
        problem,
    } = err.kind()
    else {
        panic!("not a text error: {err}");
    };
    assert_eq!(
        err.to_string(),
        format!("line {line} (entry {index}): {problem}: `{text}`")
    );
    (*line, *index, text.clone(), problem.clone())
}

#[test]
fn accepts_every_entry_kind_with_comments_and_metadata() {
    let block_line = format!("blkwrite 0x200 AB{}", "00".repeat(511));
    let text = format!(
        "\
# persim-trace pm-size=0x100000 blk-size=67108864 pm-base=0x100000000 flags=0x3 future=1
# a comment

write 0x40 2a00000000000000
ntwrite 64 00ff @ pc=0xffffffff81234567 stack=0xffffffff81000010,0xffffffff81000200
read 0x40 8   # trailing comment
flush clwb 0x7f\r
flush clflushopt 0x80
flush clflush 0xc0
fence sfence
fence mfence
fence locked
fence serializing
hypercall start
hypercall checkpoint 0x10
hypercall success
hypercall fail
hypercall volatile 0x1c0 128
{block_line}
blkread 0x400 4096
blkflush @ color=red
"
    );
    let (header, entries) = parse(&text);
    assert_eq!(
        header,
        Header {
            pm_base: 0x1_0000_0000,
            pm_size: 0x10_0000,
            blk_size: 0x400_0000,
            flags: 3
        }
    );
    let mut block = vec![0u8; 512];
    block[0] = 0xab;
    let ops: Vec<Op> = entries.iter().map(|e| e.op.clone()).collect();
    assert_eq!(
        ops,
        vec![
            Op::Write {
                addr: 0x40,
                data: vec![0x2a, 0, 0, 0, 0, 0, 0, 0],
                nt: false
            },
            Op::Write {
                addr: 64,
                data: vec![0, 0xff],
                nt: true
            },
            Op::Read {
                addr: 0x40,
                size: 8
            },
            Op::Flush {
                kind: FlushKind::Clwb,
                addr: 0x7f
            },
            Op::Flush {
                kind: FlushKind::Clflushopt,
                addr: 0x80
            },
            Op::Flush {
                kind: FlushKind::Clflush,
                addr: 0xc0
            },
            Op::Fence(FenceKind::Sfence),
            Op::Fence(FenceKind::Mfence),
            Op::Fence(FenceKind::Locked),
            Op::Fence(FenceKind::Serializing),
            Op::Hypercall(Hypercall::Start),
            Op::Hypercall(Hypercall::Checkpoint(16)),
            Op::Hypercall(Hypercall::Success),
            Op::Hypercall(Hypercall::Fail),
            Op::Hypercall(Hypercall::Volatile {
                addr: 0x1c0,
                len: 128
            }),
            Op::BlkWrite {
                offset: 0x200,
                data: block
            },
            Op::BlkRead {
                offset: 0x400,
                size: 4096
            },
            Op::BlkFlush,
        ]
    );
    assert_eq!(
        entries[1].meta,
        Meta {
            pc: Some(0xffff_ffff_8123_4567),
            stack: vec![0xffff_ffff_8100_0010, 0xffff_ffff_8100_0200],
            task: None,
        }
    );
    assert!(entries
        .iter()
        .enumerate()
        .all(|(i, e)| i == 1 || e.meta.is_empty()));
}

#[test]
fn writes_the_documented_line_forms() {
    let entry = Entry {
        op: Op::Write {
            addr: 0x40,
            data: vec![0x2a, 0xAB],
            nt: false,
        },
        meta: Meta {
            pc: Some(0xffff_ffff_8123_4567),
            stack: vec![0x10, 0x200],
            task: Some(Task {
                pid: 120,
                tid: 121,
                comm: "fs ops#1".into(),
            }),
        },
    };
    let line = "write 0x40 2aab @ pc=0xffffffff81234567 stack=0x10,0x200 pid=120 tid=121 \
                comm=fs%20ops%231";
    assert_eq!(entry.to_string(), line);
    assert_eq!(line.parse::<Entry>().unwrap(), entry);
    assert_eq!(
        Entry::from(Op::BlkRead {
            offset: 0x200,
            size: 512
        })
        .to_string(),
        "blkread 0x200 512"
    );
    assert_eq!(
        Entry::from(Op::Hypercall(Hypercall::Checkpoint(3))).to_string(),
        "hypercall checkpoint 3"
    );
}

#[test]
fn a_call_and_its_return_read_and_write_in_the_documented_forms() {
    let call = "call pmemobj_tx_alloc 0x28 0x1 @ pc=0x7ffff7f1a2b0 stack=0x555555555234";
    let ret = "return pmemobj_tx_alloc pm:0x3c0540 @ pc=0x555555555234";
    let (_, entries) = parse(&format!("{call}\n{ret}\nreturn pmem_drain 0x0\n"));
    let ops: Vec<Op> = entries.iter().map(|e| e.op.clone()).collect();
    assert_eq!(
        ops,
        [
            Op::Call {
                name: "pmemobj_tx_alloc".into(),
                args: vec![Arg::Value(0x28), Arg::Value(1)],
            },
            Op::Return {
                name: "pmemobj_tx_alloc".into(),
                value: Arg::Pm(0x3c_0540),
            },
            Op::Return {
                name: "pmem_drain".into(),
                value: Arg::Value(0),
            },
        ]
    );
    assert_eq!(entries[0].to_string(), call);
    assert_eq!(entries[1].to_string(), ret);
    assert_eq!(entries[1].meta.pc, Some(0x5555_5555_5234));
}

#[test]
fn without_a_header_line_the_header_is_zero() {
    let (header, entries) = parse("# just a comment\nfence sfence\n");
    assert_eq!(header, Header::default());
    assert_eq!(entries.len(), 1);
}

#[test]
fn errors_count_lines_and_entries_separately() {
    let text = "# header comment\nfence sfence\n\n# note\nblkflush\nwrte 0x40 2a\n";
    let (line, index, quoted, problem) = first_error(text);
    assert_eq!((line, index), (6, 2));
    assert_eq!(quoted, "wrte 0x40 2a");
    assert!(
        problem.starts_with("unknown entry kind `wrte`"),
        "{problem}"
    );
}

#[test]
fn every_kind_of_bad_line_is_reported() {
    let long_write = format!("write 0x40 {}", "00".repeat(65));
    let unaligned_blk = format!("blkwrite 0x100 {}", "00".repeat(512));
    let cases: &[(&str, &str)] = &[
        ("frobnicate 0x40", "unknown entry kind `frobnicate`"),
        ("write 0x40 2a0", "odd number of hex digits"),
        ("write 0x40 zz", "not hex digits"),
        ("write 0x40 0x2a", "not hex digits"),
        (&long_write, "a write stores 1..=64 bytes, not 65"),
        ("write 0xg0 2a", "`0xg0` is not a 64-bit number"),
        ("read 0x40 99999999999999999999", "is not a 64-bit number"),
        ("write 0x40", "`write` is missing its bytes"),
        ("flush 0x40", "unknown flush kind `0x40`"),
        ("fence lfence", "unknown fence kind `lfence`"),
        ("hypercall reboot", "unknown hypercall `reboot`"),
        ("hypercall checkpoint", "`hypercall` is missing its number"),
        ("return pmem_drain", "`return` is missing its value"),
        (
            "return f pm:0x40 0x1",
            "unexpected `0x1` after the `return` entry",
        ),
        ("return fé 0x0", "a called function's name is"),
        (
            "blkflush now",
            "unexpected `now` after the `blkflush` entry",
        ),
        (
            &unaligned_blk,
            "block write offset 0x100 is not a multiple of 512",
        ),
        (
            "blkwrite 0x200 00",
            "block write length 1 is not a non-zero multiple of 512",
        ),
        (
            "fence sfence @ pc",
            "metadata `pc` is not of the form key=value",
        ),
        ("fence sfence @ pc=xyz", "`xyz` is not a 64-bit number"),
        ("fence sfence @ stack=0x10,q", "`q` is not a 64-bit number"),
    ];
    for (line, expected) in cases {
        let (line_no, index, quoted, problem) = first_error(&format!("fence sfence\n{line}\n"));
        assert_eq!((line_no, index), (2, 1), "{line}");
        assert!(
            problem.contains(expected),
            "`{line}`: `{problem}` lacks `{expected}`"
        );
        assert!(line.starts_with(quoted.trim_end_matches("...")), "{quoted}");
    }
}

#[test]
fn bad_header_lines_are_reported() {
    for (line, expected) in [
        (
            "# persim-trace pm-size=big",
            "`big` is not a 64-bit number (hex with 0x, or decimal)",
        ),
        (
            "# persim-trace pm-size",
            "header field `pm-size` is not of the form key=value",
        ),
    ] {
        let err = Reader::new(Cursor::new(format!("{line}\nfence sfence\n").into_bytes()))
            .err()
            .expect("a bad header line is an error");
        assert_eq!(
            err.to_string(),
            format!("line 1 (entry 0): {expected}: `{line}`")
        );
    }
}

#[test]
fn header_lines_after_the_first_entry_are_comments() {
    let (header, entries) = parse("fence sfence\n# persim-trace pm-size=big\n");
    assert_eq!(header, Header::default());
    assert_eq!(entries.len(), 1);
}

#[test]
fn non_utf8_lines_are_reported() {
    let mut bytes = b"fence sfence\nwrite 0x40 ".to_vec();
    bytes.extend([0xff, 0xfe, b'\n']);
    let err = Reader::new(Cursor::new(bytes))
        .unwrap()
        .find_map(Result::err)
        .unwrap();
    assert!(
        err.to_string()
            .starts_with("line 2 (entry 1): line is not UTF-8 text"),
        "{err}"
    );
}
