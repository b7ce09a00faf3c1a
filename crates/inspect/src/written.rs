//! The PM bytes a trace wrote, per cache line, with the code that last wrote each line and
//! whether that code writes data or metadata: where `persim faults --where
//! written|data|metadata` injects, and who a fault's finding names.

use persim_trace::{Entry, Op, Symbols, TraceError};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

const LINE: u64 = 64;
/// Frames of a writer shown: the storing function and its callers up to the file system
/// and the system call (a kernel store's innermost frames are the pmem driver's copy).
const FRAMES: usize = 12;

/// The rule that tells data stores from metadata stores when the configuration gives
/// none: a file system mounted with DAX writes file data through the kernel's DAX copy
/// (`dax_…`), and a file system with a write path of its own (NOVA, PMFS, WineFS) copies
/// the data of `write()` straight from user memory (`__copy_user_nocache`,
/// `copy_user_enhanced_fast_string`, …), which no file system does for its metadata. The
/// copy routines match on the storing frame alone, so a copy loop's stores whose call
/// chain was not recorded are still data.
pub const DEFAULT_DATA_WRITERS: &[&str] = &["dax_", "__copy_user", "copy_user_"];

/// Which written bytes to draw from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrittenClass {
    All,
    Data,
    Metadata,
}

/// One written cache line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenLine {
    /// Bit `i`: byte `i` of the line was written.
    pub mask: u64,
    /// The code of the last store to the line (`function+0xoff < caller …`), as far as
    /// recorded and known.
    pub writer: Option<String>,
    /// Whether that store is a data store by the rule.
    pub data: bool,
}

/// The written lines of a trace, by line offset.
#[derive(Clone, Debug, Default)]
pub struct Written {
    lines: BTreeMap<u64, WrittenLine>,
}

impl Written {
    /// The PM bytes `entries` stored to; a store is data when a frame of its stack is in a
    /// function whose name starts with one of `data_writers`.
    pub fn of_trace<I>(
        entries: I,
        symbols: Option<&Symbols>,
        data_writers: &[String],
    ) -> Result<Written, TraceError>
    where
        I: IntoIterator<Item = Result<Entry, TraceError>>,
    {
        // One lookup per distinct call chain: a trace repeats few chains many times.
        let mut chains: HashMap<Vec<u64>, (Option<String>, bool)> = HashMap::new();
        let mut lines = BTreeMap::new();
        for entry in entries {
            let entry = entry?;
            let Op::Write { addr, data, .. } = &entry.op else {
                continue;
            };
            let frames: Vec<u64> = entry
                .meta
                .pc
                .iter()
                .chain(&entry.meta.stack)
                .copied()
                .collect();
            let (writer, data_store) = chains
                .entry(frames)
                .or_insert_with_key(|frames| describe(frames, symbols, data_writers))
                .clone();
            for byte in *addr..*addr + data.len() as u64 {
                let line: &mut WrittenLine =
                    lines
                        .entry(byte - byte % LINE)
                        .or_insert_with(|| WrittenLine {
                            mask: 0,
                            writer: None,
                            data: false,
                        });
                line.mask |= 1 << (byte % LINE);
                line.writer = writer.clone();
                line.data = data_store;
            }
        }
        Ok(Written { lines })
    }

    /// Written bytes of `class`, as ascending disjoint ranges.
    pub fn ranges(&self, class: WrittenClass) -> Vec<Range<u64>> {
        let mut ranges: Vec<Range<u64>> = Vec::new();
        for (&line, written) in &self.lines {
            let wanted = match class {
                WrittenClass::All => true,
                WrittenClass::Data => written.data,
                WrittenClass::Metadata => !written.data,
            };
            if !wanted {
                continue;
            }
            for bit in 0..LINE {
                if written.mask & (1 << bit) == 0 {
                    continue;
                }
                let byte = line + bit;
                match ranges.last_mut() {
                    Some(last) if last.end == byte => last.end += 1,
                    _ => ranges.push(byte..byte + 1),
                }
            }
        }
        ranges
    }

    /// The written line of the first written byte in `range`, if any.
    pub fn line_in(&self, range: Range<u64>) -> Option<&WrittenLine> {
        let first = range.start - range.start % LINE;
        self.lines
            .range(first..range.end)
            .map(|(&line, written)| (line, written))
            .find(|&(line, written)| {
                (0..LINE).any(|bit| written.mask & (1 << bit) != 0 && range.contains(&(line + bit)))
            })
            .map(|(_, written)| written)
    }
}

/// A call chain's description and whether it is a data store.
fn describe(
    frames: &[u64],
    symbols: Option<&Symbols>,
    data_writers: &[String],
) -> (Option<String>, bool) {
    let Some(symbols) = symbols.filter(|_| !frames.is_empty()) else {
        return (None, false);
    };
    let data = frames.iter().any(|&address| {
        symbols.resolve(address).is_some_and(|location| {
            (data_writers.iter()).any(|prefix| location.function.starts_with(prefix.as_str()))
        })
    });
    let shown = symbols.describe_frames(&frames[..frames.len().min(FRAMES)]);
    (Some(shown.join(" < ")), data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_trace::Meta;

    /// A store at `pc`, called from `caller` (0: no caller recorded).
    fn store(addr: u64, len: usize, pc: u64, caller: u64) -> Result<Entry, TraceError> {
        Ok(Entry {
            op: Op::Write {
                addr,
                data: vec![1; len],
                nt: false,
            },
            meta: Meta {
                pc: Some(pc),
                stack: [caller].into_iter().filter(|&c| c != 0).collect(),
                ..Meta::default()
            },
        })
    }

    #[test]
    fn lines_know_their_bytes_their_last_writer_and_its_class() {
        let symbols = Symbols::from_kallsyms(
            "0000000000001000 T ext4_mark_iloc_dirty\n0000000000002000 T \
             __memcpy_flushcache\n0000000000003000 T dax_iomap_rw\n0000000000004000 T end\n",
        );
        let writers = vec!["dax_".to_owned()];
        let dax = 0x3010;
        let entries = vec![
            // metadata: 8 bytes of line 0; data (the copy called by the DAX path): line 2
            store(0, 8, 0x1010, 0),
            store(128, 64, 0x2000, dax),
            // lines 0 and 1: the last writer of line 0 is now the DAX copy
            store(60, 8, 0x2004, dax),
            Ok(Entry {
                op: Op::Fence(persim_trace::FenceKind::Sfence),
                meta: Meta::default(),
            }),
        ];
        let written = Written::of_trace(entries, Some(&symbols), &writers).unwrap();
        assert_eq!(written.ranges(WrittenClass::All), [0..8, 60..68, 128..192]);
        assert_eq!(written.ranges(WrittenClass::Data), [0..8, 60..68, 128..192]);
        assert!(written.ranges(WrittenClass::Metadata).is_empty());
        let line = written.line_in(64..70).unwrap();
        assert!(line.data);
        assert_eq!(
            line.writer.as_deref(),
            Some("__memcpy_flushcache+0x4 < dax_iomap_rw+0x10")
        );
        assert!(written.line_in(8..60).is_none());
        // Without the DAX copy after it, line 0 is metadata.
        let only_ext4 = vec![store(0, 8, 0x1010, 0)];
        let written = Written::of_trace(only_ext4, Some(&symbols), &writers).unwrap();
        let metadata = written.ranges(WrittenClass::Metadata);
        assert_eq!((metadata.len(), &metadata[0]), (1, &(0..8)));
        assert!(written.ranges(WrittenClass::Data).is_empty());
        let line = written.line_in(0..1).unwrap();
        assert_eq!(line.writer.as_deref(), Some("ext4_mark_iloc_dirty+0x10"));
    }

    /// NOVA's write path: `nova_dax_file_write` is no `dax_…` function, and the copy loop's
    /// stores often carry no call chain; the user copy alone makes them data.
    #[test]
    fn a_copy_from_user_memory_is_data_by_default() {
        let symbols = Symbols::from_kallsyms(
            "0000000000001000 T nova_update_inode
0000000000002000 T \
             __copy_user_nocache
0000000000003000 T nova_dax_file_write
\
             0000000000004000 T end
",
        );
        let writers: Vec<String> = DEFAULT_DATA_WRITERS.iter().map(|w| w.to_string()).collect();
        let entries = vec![
            store(0, 8, 0x1010, 0x3010),
            store(128, 64, 0x2073, 0x3010),
            store(192, 64, 0x2073, 0),
        ];
        let written = Written::of_trace(entries, Some(&symbols), &writers).unwrap();
        assert_eq!(written.ranges(WrittenClass::Metadata), vec![(0..8)]);
        assert_eq!(written.ranges(WrittenClass::Data), vec![(128..256)]);
    }
}
