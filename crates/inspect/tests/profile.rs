//! `persim profile`'s figures on hand-written traces whose every figure is known.

use persim_inspect::{profile, Profile};
use persim_trace::Reader;

fn run(text: &str) -> Profile {
    let reader = Reader::new(std::io::Cursor::new(text.as_bytes().to_vec())).unwrap();
    profile(reader, None).unwrap()
}

#[test]
fn figures_per_interval_and_in_total() {
    let p = run("hypercall start\n\
                 write 0x0 0102030405060708\n\
                 flush clwb 0x0\n\
                 fence sfence\n\
                 hypercall checkpoint 1\n\
                 ntwrite 0x100 0102030405060708090a0b0c0d0e0f10\n\
                 ntwrite 0x110 0102030405060708090a0b0c0d0e0f10\n\
                 write 0x400 01\n\
                 flush clwb 0x400\n\
                 fence sfence\n\
                 read 0x500 8\n\
                 hypercall checkpoint 2\n\
                 hypercall success\n");
    let froms: Vec<Option<u64>> = p.parts.iter().map(|part| part.from).collect();
    assert_eq!(froms, [None, Some(1), Some(2)]);
    let cp1 = &p.parts[1].stats;
    assert_eq!((cp1.stores, cp1.bytes_nt, cp1.bytes_cached), (3, 32, 1));
    assert_eq!(cp1.store_sizes.get(&16), Some(&2));
    assert_eq!((cp1.flushes["clwb"], cp1.fences["sfence"]), (1, 1));
    assert_eq!((cp1.reads, cp1.bytes_read), (1, 8));
    // one epoch wrote two XPLines (0x100 and 0x400), both partly
    assert_eq!(
        (cp1.epochs, cp1.xpline_bytes, cp1.partial_xplines),
        (1, 512, 2)
    );
    // 0x100 starts a run after 0x0..0x8 (not contiguous), 0x110 continues it, 0x400 and
    // the read at 0x500 jump: 3 of 4 accesses
    assert_eq!(cp1.nonsequential, 3);
    let d = &p.parts[1].derived;
    assert!((d.nt_share - 32.0 / 33.0).abs() < 1e-9);
    assert!((d.write_amplification - 512.0 / 33.0).abs() < 1e-9);
    assert!((d.isad - 0.75).abs() < 1e-9);
    assert!((d.fences_per_kib - 1024.0 / 33.0).abs() < 1e-9);
    let start = &p.parts[0].stats;
    assert_eq!(
        (start.epochs, start.xpline_bytes, start.partial_xplines),
        (1, 256, 1)
    );
    assert_eq!(p.parts[2].stats.entries, 2, "checkpoint 2 and success");
    assert_eq!((p.total.bytes_written(), p.total.epochs), (41, 2));
    assert_eq!(p.total.entries, 13);
}

#[test]
fn a_whole_xpline_in_one_epoch_is_not_partial_and_amplifies_nothing() {
    let mut text = String::new();
    for line in 0..4 {
        text.push_str(&format!(
            "ntwrite {:#x} {}\n",
            0x200 + line * 64,
            "ab".repeat(64)
        ));
    }
    text.push_str("fence sfence\n");
    let p = run(&text);
    assert_eq!((p.total.partial_xplines, p.total.xpline_bytes), (0, 256));
    assert!((p.total_derived.write_amplification - 1.0).abs() < 1e-9);
    assert!(p.total_derived.isad > 0.0 && p.total_derived.isad <= 0.25);
    let table = p.to_text();
    assert!(
        table.contains("total") && table.contains("100 %"),
        "{table}"
    );
}

#[test]
fn the_plot_series_follow_the_trace_and_render_as_svg() {
    let p = run("write 0x0 0102030405060708\n\
                 flush clwb 0x0\n\
                 fence sfence\n\
                 ntwrite 0x3c 0102030405060708\n\
                 fence sfence\n");
    let s = &p.series;
    assert_eq!(s.timeline.first(), Some(&(0, 0, 0)));
    assert_eq!(s.timeline.last(), Some(&(5, 8, 8)));
    // two epochs of 8 bytes: bucket 3 (4 < bytes <= 8)
    assert_eq!(s.epoch_sizes.iter().collect::<Vec<_>>(), [(&3, &2)]);
    // the NT store crosses into line 0x40: 4 bytes each side
    let lines: Vec<(u64, u64)> = s.line_bytes.iter().map(|(l, b)| (*l, *b)).collect();
    assert_eq!(lines, [(0x0, 12), (0x40, 4)]);
    let svgs = persim_inspect::profile_svgs(&p).unwrap();
    let names: Vec<&str> = svgs.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "bytes-over-time.svg",
            "epoch-sizes.svg",
            "written-lines.svg"
        ]
    );
    for (name, svg) in &svgs {
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{name}");
    }
    assert!(
        svgs[2].1.contains("0x0..0x80"),
        "the heat map names its range"
    );
}

#[test]
fn code_is_counted_per_function_with_symbols_and_per_pc_without() {
    let text = "write 0x0 0102030405060708 @ pc=0x1010\n\
                ntwrite 0x40 0102030405060708 @ pc=0x1020\n\
                flush clwb 0x0 @ pc=0x2000\n\
                fence sfence @ pc=0x2004\n\
                write 0x80 01 @ pc=0x3000\n";
    let reader = || Reader::new(std::io::Cursor::new(text.as_bytes().to_vec())).unwrap();
    let symbols = persim_trace::Symbols::from_kallsyms(
        "0000000000001000 t copy_to_pmem\t[nd_pmem]\n0000000000002000 T persist\n",
    );
    let p = profile(reader(), Some(&symbols)).unwrap();
    let code: Vec<(&str, u64, u64, u64, u64, u64)> = p
        .code
        .iter()
        .map(|c| {
            (
                c.code.as_str(),
                c.stores,
                c.bytes_cached,
                c.bytes_nt,
                c.flushes,
                c.fences,
            )
        })
        .collect();
    assert_eq!(
        code,
        [
            ("copy_to_pmem [nd_pmem]", 2, 8, 8, 0, 0),
            ("persist", 1, 1, 0, 1, 1),
        ],
        "0x3000 lies in persist (the last symbol), 1 byte"
    );
    assert!(p.to_text().contains("copy_to_pmem [nd_pmem]"));
    let plain = profile(reader(), None).unwrap();
    assert_eq!(plain.code.len(), 5);
    assert_eq!(plain.code[0].code, "0x1010");
}
