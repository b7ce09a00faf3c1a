//! Trace debugging on the bundled NOVA-style example.

use persim_inspect::{entries_touching, pending_at};
use persim_model::Config;
use persim_trace::{Reader, Symbols};
use std::path::Path;

fn reader() -> Reader {
    Reader::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nova-hello.trace"))
        .unwrap()
}

#[test]
fn pending_state_shows_the_unflushed_tail() {
    let state = pending_at(reader(), Config::new(0x2000), 8).unwrap();
    assert_eq!(state.lines.len(), 1);
    let line = &state.lines[0];
    assert_eq!((line.line, line.flush_mark), (0x1000, 0));
    let units: Vec<(u64, &str, bool, u64)> = line
        .units
        .iter()
        .map(|u| (u.addr, u.bytes.as_str(), u.nt, u.entry))
        .collect();
    assert_eq!(units, [(0x1008, "6c640a", false, 3)]);
    assert!(state.to_text().contains("line 0x1000"));
    // before the first fence both the NT part and the tail are pending
    let early = pending_at(reader(), Config::new(0x2000), 4).unwrap();
    assert_eq!(early.lines[0].units.len(), 2);
}

#[test]
fn entries_touching_lines_with_fences_between() {
    let tail = entries_touching(reader(), &[0x1000], None).unwrap();
    assert_eq!(tail.len(), 2);
    assert!(tail[0].starts_with("2: ntwrite 0x1000") && tail[1].starts_with("3: write 0x1008"));
    let both = entries_touching(reader(), &[0x1003, 0x40], None).unwrap();
    let indices: Vec<&str> = both.iter().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(indices, ["2", "3", "4", "5", "6"]);
    assert!(both[2].contains("fence sfence"));
}

#[test]
fn an_index_beyond_the_trace_is_an_error_and_its_end_is_not() {
    let entries = reader().count() as u64;
    assert!(pending_at(reader(), Config::new(0x2000), entries).is_ok());
    let e = pending_at(reader(), Config::new(0x2000), entries + 5)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("entry {} is beyond the trace", entries + 5))
            && e.contains(&format!("has {entries} entries")),
        "{e}"
    );
}

/// NOVA's tail store, by a function the symbols name.
const WITH_PCS: &str = "\
# persim-trace pm-size=0x2000
hypercall start
ntwrite 0x1000 48656c6c6f576f72 @ pc=0xffffffffc0101010 stack=0xffffffffc0102020
write 0x1008 6c640a @ pc=0xffffffffc0101018 stack=0xffffffffc0102020
fence sfence
";

#[test]
fn entries_and_pending_stores_name_their_code() {
    let symbols = Symbols::from_kallsyms(
        "ffffffffc0101000 t memcpy_to_pmem_nocache\t[nova]\n\
         ffffffffc0102000 t nova_file_write\t[nova]\n",
    );
    let text = || Reader::new(std::io::Cursor::new(WITH_PCS)).unwrap();
    let found = entries_touching(text(), &[0x1000], Some(&symbols)).unwrap();
    assert!(
        found[1].ends_with("  # memcpy_to_pmem_nocache+0x18 [nova] < nova_file_write+0x20 [nova]"),
        "{found:?}"
    );
    let mut state = pending_at(text(), Config::new(0x2000), 3).unwrap();
    state.describe_code(text(), &symbols).unwrap();
    let codes: Vec<Option<&str>> = state.lines[0]
        .units
        .iter()
        .map(|u| u.code.as_deref())
        .collect();
    assert_eq!(
        codes,
        [
            Some("memcpy_to_pmem_nocache+0x10 [nova] < nova_file_write+0x20 [nova]"),
            Some("memcpy_to_pmem_nocache+0x18 [nova] < nova_file_write+0x20 [nova]")
        ]
    );
    assert!(state
        .to_text()
        .contains("# memcpy_to_pmem_nocache+0x18 [nova]"));
}

#[test]
fn pending_disk_writes_are_those_since_the_last_disk_flush() {
    let text = format!(
        "# persim-trace pm-size=0x1000 blk-size=0x1000\n\
         blkwrite 0x200 {}\nblkflush\nblkwrite 0x400 {}\nwrite 0x40 01\nblkwrite 0x0 {}\n",
        "11".repeat(512),
        "22".repeat(1024),
        "33".repeat(512)
    );
    let mixed = || Reader::new(std::io::Cursor::new(text.clone())).unwrap();
    let config = Config::of_header(&mixed().header());
    let writes = |index| -> Vec<(u64, u64, u64)> {
        let state = pending_at(mixed(), config.clone(), index).unwrap();
        state
            .disk_writes
            .iter()
            .map(|w| (w.entry, w.offset, w.len))
            .collect()
    };
    assert_eq!(writes(1), [(0, 0x200, 512)]);
    assert_eq!(writes(2), [], "the disk flush made it durable");
    assert_eq!(writes(5), [(2, 0x400, 1024), (4, 0, 512)]);
    let text = pending_at(mixed(), config, 5).unwrap().to_text();
    assert!(
        text.contains(
            "disk: 2 write(s) not flushed:\n  entry 2        blkwrite 0x400 (1024 bytes)\n"
        ),
        "{text}"
    );
    // Without a disk, nothing of it shows.
    let pm_only = pending_at(reader(), Config::new(0x2000), 8).unwrap();
    assert!(!pm_only.to_text().contains("disk"));
    let json = serde_json::to_value(&pm_only).unwrap();
    assert!(json.get("disk_writes").is_none(), "{json}");
}
