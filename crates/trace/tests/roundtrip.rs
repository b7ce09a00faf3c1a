//! Every valid trace reads back exactly as written, in both forms.

#[path = "common/strategies.rs"]
mod strategies;

use std::io::Cursor;

use persim_trace::{
    read_all, BackgroundWriter, BinaryWriter, Entry, Format, Header, Op, Reader, TextWriter,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn read_back(bytes: Vec<u8>) -> (Format, Header, Vec<Entry>) {
    let reader = Reader::new(Cursor::new(bytes)).expect("header reads");
    let (format, header) = (reader.format(), reader.header());
    let entries = reader.collect::<Result<Vec<_>, _>>().expect("entries read");
    (format, header, entries)
}

fn text(header: &Header, entries: &[Entry]) -> Vec<u8> {
    let mut w = TextWriter::new(Vec::new(), header).unwrap();
    for e in entries {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

fn binary(header: &Header, entries: &[Entry]) -> Vec<u8> {
    let mut w = BinaryWriter::new(Vec::new(), header).unwrap();
    for e in entries {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn text_round_trip(header in strategies::header(), entries in vec(strategies::entry(), 0..40)) {
        let (format, read_header, read_entries) = read_back(text(&header, &entries));
        prop_assert_eq!(format, Format::Text);
        prop_assert_eq!(read_header, header);
        prop_assert_eq!(read_entries, entries);
    }

    #[test]
    fn binary_round_trip(header in strategies::header(), entries in vec(strategies::entry(), 0..40)) {
        let (format, read_header, read_entries) = read_back(binary(&header, &entries));
        prop_assert_eq!(format, Format::Binary);
        prop_assert_eq!(read_header, header);
        prop_assert_eq!(read_entries, entries);
    }

    #[test]
    fn single_line_round_trip(entry in strategies::entry()) {
        let line = entry.to_string();
        prop_assert!(!line.contains('\n'));
        prop_assert_eq!(line.parse::<Entry>(), Ok(entry));
    }
}

#[test]
fn writers_reject_entries_the_format_cannot_hold() {
    let too_long = Entry::from(Op::Write {
        addr: 0,
        data: vec![0; 65],
        nt: false,
    });
    let unaligned = Entry::from(Op::BlkWrite {
        offset: 100,
        data: vec![0; 512],
    });
    for entry in [&too_long, &unaligned] {
        let mut text = TextWriter::new(Vec::new(), &Header::default()).unwrap();
        assert_eq!(
            text.write(entry).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        let mut bin = BinaryWriter::new(Vec::new(), &Header::default()).unwrap();
        assert_eq!(
            bin.write(entry).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
    }
}

#[test]
fn background_writer_renames_only_when_finished() {
    let dir = std::env::temp_dir().join(format!("persim-trace-bg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.bin");
    let others = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|name| name != "trace.bin")
            .count()
    };
    let header = Header {
        pm_size: 0x10_0000,
        ..Header::default()
    };
    // More than one batch, and a partial last batch.
    let entries: Vec<Entry> = (0..10_000u64)
        .map(|i| {
            Entry::from(Op::Write {
                addr: i * 8,
                data: i.to_le_bytes().to_vec(),
                nt: i % 7 == 0,
            })
        })
        .collect();

    let mut writer = BackgroundWriter::spawn(&path, &header).unwrap();
    for e in &entries {
        writer.send(e.clone());
    }
    assert!(!path.exists(), "the final name appears only on finish");
    assert_eq!(others(), 1, "written under a temporary name");
    writer.finish().unwrap();
    assert_eq!(others(), 0, "the temporary name is gone");

    let (read_header, read_entries) = read_all(&path).unwrap();
    assert_eq!(read_header, header);
    assert_eq!(read_entries, entries);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn background_writer_reports_invalid_entries_on_finish() {
    let dir = std::env::temp_dir().join(format!("persim-trace-bg-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.bin");
    let mut writer = BackgroundWriter::spawn(&path, &Header::default()).unwrap();
    writer.send(Entry::from(Op::Write {
        addr: 0,
        data: Vec::new(),
        nt: false,
    }));
    let err = writer.finish().unwrap_err();
    assert!(
        err.to_string().contains("a write stores 1..=64 bytes"),
        "{err}"
    );
    assert!(!path.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reader_and_background_writer_can_move_to_other_threads() {
    fn send<T: Send>() {}
    send::<Reader>();
    send::<BackgroundWriter>();
}
