//! A damaged or hostile binary trace is an error naming the entry and the byte, never a
//! panic, never a silently shorter trace.

#[path = "common/strategies.rs"]
mod strategies;

use std::io::Cursor;

use persim_trace::{BinaryWriter, Entry, Header, Reader, TraceError, TraceErrorKind};
use proptest::collection::vec;
use proptest::prelude::*;

fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut w = BinaryWriter::new(Vec::new(), &Header::default()).unwrap();
    for e in entries {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

/// The header of a binary trace (magic, version, fields), taken from the writer itself.
fn binary_header() -> Vec<u8> {
    let empty = encode(&[]);
    let zstd_start = (0..empty.len())
        .find(|&i| empty[i..].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]))
        .unwrap();
    empty[..zstd_start].to_vec()
}

/// A binary trace whose decompressed entry stream is `stream`.
fn with_stream(stream: &[u8]) -> Vec<u8> {
    let mut bytes = binary_header();
    bytes.extend(zstd::encode_all(stream, 3).unwrap());
    bytes
}

/// Reads everything; returns the entries before the first error and the error.
fn read(bytes: Vec<u8>) -> (Vec<Entry>, Option<TraceError>) {
    let reader = match Reader::new(Cursor::new(bytes)) {
        Ok(reader) => reader,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut entries = Vec::new();
    for item in reader {
        match item {
            Ok(e) => entries.push(e),
            Err(e) => return (entries, Some(e)),
        }
    }
    (entries, None)
}

/// An error about an entry names its index (the count of entries before it) and a byte
/// offset, in the words the CLI shows.
fn assert_names_entry(err: &TraceError, entries_before: usize) {
    match err.kind() {
        TraceErrorKind::Corrupt { index, offset, .. } => {
            assert_eq!(*index, entries_before as u64);
            let text = err.to_string();
            let expected = format!("corrupt entry {index} at byte {offset} of the entry stream: ");
            assert!(text.starts_with(&expected), "{text}");
        }
        TraceErrorKind::Header(_) => assert_eq!(entries_before, 0),
        other => panic!("unexpected error kind {other:?}"),
    }
}

#[test]
fn unknown_tag_names_entry_and_offset() {
    // Entry 0: write tag, address delta 2 (= +1), length 1, one byte; entry 1: tag 0x17.
    let (entries, err) = read(with_stream(&[0x01, 0x02, 0x01, 0xaa, 0x17]));
    assert_eq!(entries.len(), 1);
    assert_eq!(
        err.unwrap().to_string(),
        "corrupt entry 1 at byte 4 of the entry stream: unknown tag 0x17"
    );
}

#[test]
fn open_names_the_file() {
    let path = std::env::temp_dir().join(format!("persim-corrupt-{}.bin", std::process::id()));
    std::fs::write(&path, with_stream(&[0x17])).unwrap();
    let err = Reader::open(&path).unwrap().next().unwrap().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: corrupt entry 0 at byte 0 of the entry stream: unknown tag 0x17",
            path.display()
        )
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn lengths_over_the_limits_are_rejected_before_allocation() {
    let cases: [(&[u8], &str); 5] = [
        (&[0x01, 0x00, 0x41], "write length 65 is outside 1..=64"),
        (&[0x01, 0x00, 0x00], "write length 0 is outside 1..=64"),
        // A block write of 2^63 blocks.
        (
            &[
                0x0f, 0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
            ],
            "block write of 9223372036854775808 blocks is longer than",
        ),
        (
            &[0x91, 0x02, 0xe8, 0x07],
            "stack depth 1000 is outside 1..=256",
        ),
        (
            &[
                0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ],
            "longer than 64 bits",
        ),
    ];
    for (stream, problem) in cases {
        let (entries, err) = read(with_stream(stream));
        let err = err.expect("corrupt stream is an error");
        assert!(entries.is_empty());
        assert_names_entry(&err, 0);
        assert!(err.to_string().contains(problem), "{err} lacks {problem}");
    }
}

#[test]
fn missing_or_wrong_end_marker_is_an_error() {
    // A complete entry, then the stream ends without an end marker.
    let (entries, err) = read(with_stream(&[0x07]));
    assert_eq!(entries.len(), 1);
    assert!(err.unwrap().to_string().contains("truncated"));
    // The end marker counts 5 entries but there is one.
    let (_, err) = read(with_stream(&[0x07, 0x00, 0x05]));
    assert!(err
        .unwrap()
        .to_string()
        .contains("end marker counts 5 entries"));
    // Data after the end marker.
    let (_, err) = read(with_stream(&[0x07, 0x00, 0x01, 0x07]));
    assert!(err
        .unwrap()
        .to_string()
        .contains("data follows the end marker"));
}

#[test]
fn newer_format_version_is_a_header_error() {
    let mut bytes = encode(&[]);
    bytes[8] = 2;
    let err = Reader::new(Cursor::new(bytes))
        .err()
        .expect("version 2 is refused");
    assert!(
        err.to_string()
            .contains("format version 2 is not supported"),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_entry_streams_never_panic(stream in vec(any::<u8>(), 0..200)) {
        let (entries, err) = read(with_stream(&stream));
        if let Some(err) = err {
            assert_names_entry(&err, entries.len());
        }
    }

    #[test]
    fn arbitrary_bytes_after_the_header_never_panic(tail in vec(any::<u8>(), 0..200)) {
        let mut bytes = binary_header();
        bytes.extend(tail);
        let (entries, err) = read(bytes);
        prop_assert!(err.is_some(), "random bytes are not a zstd frame");
        assert_names_entry(&err.unwrap(), entries.len());
    }

    #[test]
    fn truncated_traces_are_errors(entries in vec(strategies::entry(), 1..30), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&entries);
        // Never 0: an empty file is a valid (empty) text trace.
        let len = 1 + cut.index(bytes.len() - 1);
        let (read_entries, err) = read(bytes[..len].to_vec());
        let err = err.expect("a truncated trace is an error");
        prop_assert!(read_entries.len() <= entries.len());
        prop_assert_eq!(&read_entries[..], &entries[..read_entries.len()]);
        if len >= binary_header().len() {
            assert_names_entry(&err, read_entries.len());
        }
    }

    #[test]
    fn bit_flips_never_panic(entries in vec(strategies::entry(), 1..30), at in any::<prop::sample::Index>(), bit in 0..8u8) {
        let mut bytes = encode(&entries);
        let header_len = binary_header().len();
        let i = header_len + at.index(bytes.len() - header_len);
        bytes[i] ^= 1 << bit;
        let (read_entries, err) = read(bytes);
        match err {
            Some(err) => assert_names_entry(&err, read_entries.len()),
            // zstd's checksum covers the content, so a flip that decodes must be in the
            // frame's own bookkeeping and leave the entries intact.
            None => prop_assert_eq!(read_entries, entries),
        }
    }
}
