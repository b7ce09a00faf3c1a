//! The thesis' worked examples, in docs/design/model.md terms, on the bundled example traces.

use persim_model::{
    replay_in_memory, CacheMode, Choice, Config, FailureKind, PointImages, Scope, Strategy,
};
use persim_trace::{read_all, Entry, FenceKind, Op};
use std::path::Path;

fn replay(trace: &str, cache: CacheMode, strategy: Strategy) -> Vec<PointImages> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(trace);
    let (header, entries) = read_all(&path).unwrap();
    replay_entries(&entries, header.pm_size, cache, strategy)
}

fn replay_entries(
    entries: &[Entry],
    pm_size: u64,
    cache: CacheMode,
    strategy: Strategy,
) -> Vec<PointImages> {
    let mut config = Config::new(pm_size);
    config.cache = cache;
    config.strategy = strategy;
    replay_in_memory(config, vec![0; pm_size as usize], entries).unwrap()
}

/// The distinct images of the first fence's failure point, sorted.
fn distinct_at_first_fence(points: Vec<PointImages>) -> Vec<Vec<u8>> {
    let fence = points
        .into_iter()
        .find(|p| p.point.kind == FailureKind::Fence)
        .unwrap();
    let mut images: Vec<Vec<u8>> = fence.images.into_iter().map(|(img, _, _)| img).collect();
    images.sort();
    images.dedup();
    images
}

fn images(points: &[PointImages]) -> impl Iterator<Item = (&PointImages, &Vec<u8>)> {
    points
        .iter()
        .flat_map(|p| p.images.iter().map(move |(img, _, _)| (p, img)))
}

/// The journal's invariant: a set commit flag implies the complete log.
fn commit_without_log(img: &[u8]) -> bool {
    img[0x40] == 1 && img[0..16] != [[0x11; 8], [0x22; 8]].concat()[..]
}

#[test]
fn journal_with_fences_never_commits_an_incomplete_log() {
    for cache in [CacheMode::Volatile, CacheMode::Persistent] {
        let points = replay("journal.trace", cache, Strategy::Exhaustive);
        assert_eq!(points.len(), 7, "4 fences, 2 checkpoints, the end");
        assert!(images(&points).all(|(_, img)| !commit_without_log(img)));
        // a torn home location is always recoverable: the log is committed
        let new = [[0x11; 8], [0x22; 8]].concat();
        assert!(images(&points).all(|(_, img)| {
            let home = &img[0x80..0x90];
            home == [0; 16] || home == new || (img[0x40] == 1 && img[0..16] == new[..])
        }));
    }
}

#[test]
fn journal_missing_its_fence_can_commit_an_incomplete_log() {
    for strategy in [Strategy::Exhaustive, Strategy::GlobalPrefix] {
        let points = replay("journal-missing-fence.trace", CacheMode::Volatile, strategy);
        let witness: Vec<&PointImages> = images(&points)
            .filter(|(_, img)| commit_without_log(img))
            .map(|(p, _)| p)
            .collect();
        assert!(!witness.is_empty(), "{strategy} misses the bug");
        // the witness is a crash before the commit's fence, the first fence of the trace
        assert!(witness
            .iter()
            .all(|p| p.point.kind == FailureKind::Fence && p.point.index == 7));
    }
    // with persistent caches the stores reach PM in program order: no bug
    let points = replay(
        "journal-missing-fence.trace",
        CacheMode::Persistent,
        Strategy::Exhaustive,
    );
    assert!(images(&points).all(|(_, img)| !commit_without_log(img)));
}

#[test]
fn nt_store_carries_the_lines_earlier_cached_data() {
    let a = [0xaa; 8];
    let b = [0xbb; 8];
    let c = [0xcc; 8];
    let volatile = replay("nt-mixed.trace", CacheMode::Volatile, Strategy::Exhaustive);
    let at_fence: Vec<&Vec<u8>> = volatile[0].images.iter().map(|(img, _, _)| img).collect();
    // line 0: nothing, A, A+B; line 0x40: with or without C
    assert_eq!(at_fence.len(), 6);
    assert!(at_fence.iter().all(|img| img[8..16] != b || img[0..8] == a));
    // after the fence A and B are durable without a flush; C may still be lost
    let at_end: Vec<&Vec<u8>> = volatile[1].images.iter().map(|(img, _, _)| img).collect();
    assert_eq!(at_end.len(), 2);
    assert!(at_end.iter().all(|img| img[0..8] == a && img[8..16] == b));

    // persistent caches: the store buffer drains A before C, B is free between them
    let eadr = replay(
        "nt-mixed.trace",
        CacheMode::Persistent,
        Strategy::Exhaustive,
    );
    let at_fence: Vec<&Vec<u8>> = eadr[0].images.iter().map(|(img, _, _)| img).collect();
    assert_eq!(at_fence.len(), 5);
    assert!(at_fence
        .iter()
        .all(|img| img[0x40..0x48] != c || img[0..8] == a));
    assert_eq!(eadr[1].images.len(), 1, "the fence drained everything");
}

#[test]
fn partial_nt_stores_persist_as_word_prefixes() {
    let data: Vec<u8> = (1..=24).collect();
    for (addr, cut_points) in [(0x0u64, vec![0, 8, 16, 24]), (0x4, vec![0, 4, 12, 20, 24])] {
        let len = if addr == 0 { 24 } else { 20 };
        let entries = vec![
            Entry::from(Op::Write {
                addr,
                data: data[..len].to_vec(),
                nt: true,
            }),
            Entry::from(Op::Fence(FenceKind::Sfence)),
        ];
        let points = replay_entries(&entries, 0x100, CacheMode::Volatile, Strategy::Exhaustive);
        let mut got: Vec<Vec<u8>> = points[0]
            .images
            .iter()
            .map(|(img, _, _)| img[addr as usize..addr as usize + len].to_vec())
            .collect();
        got.sort();
        let mut expected: Vec<Vec<u8>> = cut_points
            .iter()
            .filter(|&&n| n <= len)
            .map(|&n| [&data[..n], &vec![0; len - n][..]].concat())
            .collect();
        expected.sort();
        assert_eq!(got, expected, "NT store at {addr:#x}");
    }
}

#[test]
fn nova_unaligned_tail_can_be_lost_after_commit() {
    let witness = |img: &Vec<u8>| img[0x40] == 0x0b && img[0x1008..0x100b] == [0, 0, 0];
    for strategy in [
        Strategy::Exhaustive,
        Strategy::GlobalPrefix,
        Strategy::ProgramOrder,
    ] {
        let points = replay("nova-hello.trace", CacheMode::Volatile, strategy);
        let found: Vec<(u64, &Choice)> = points
            .iter()
            .flat_map(|p| {
                p.images
                    .iter()
                    .filter(|(img, _, _)| witness(img))
                    .map(move |(_, c, _)| (p.point.index, c))
            })
            .collect();
        assert!(!found.is_empty(), "{strategy} misses the lost tail");
        // the aligned NT part is always there once committed
        assert!(images(&points)
            .all(|(_, img)| img[0x40] != 0x0b || &img[0x1000..0x1008] == b"HelloWor"));
    }
}

/// The redo journal's recovery: the home location, with the log applied when the commit
/// flag is set; and the words it reads (the log only when the flag is set).
fn journal_recovery(img: &[u8]) -> (Vec<u8>, Vec<u64>) {
    if img[0x40] == 1 {
        (img[0..0x10].to_vec(), vec![0x00, 0x08, 0x40, 0x80, 0x88])
    } else {
        (img[0x80..0x90].to_vec(), vec![0x40, 0x80, 0x88])
    }
}

/// The thesis' Figure 8.9: retiring a log entry in the same epoch as overwriting it. In
/// the fully persisted image the flag is clear, so recovery does not read the log; only
/// the correction for shrinking read sets (the previous fence's recovery read it) explores
/// the log line and finds the uncommitted values recovery would apply.
#[test]
fn reads_finds_a_reused_log_through_the_shrinking_read_set() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/journal-log-reuse.trace");
    let (header, entries) = read_all(&path).unwrap();
    for cache in [CacheMode::Volatile, CacheMode::Persistent] {
        let mut config = Config::new(header.pm_size);
        config.cache = cache;
        config.strategy = Strategy::Reads;
        let initial = vec![0; header.pm_size as usize];
        let points = persim_model::replay_in_memory_guided(config, initial, &entries, &mut |img| {
            Some(journal_recovery(img).1)
        })
        .unwrap();
        let uncommitted = [[0x33; 8], [0x44; 8]].concat();
        let in_first_interval: Vec<&PointImages> = images(&points)
            .filter(|(p, img)| {
                p.point.checkpoint == Some(1) && journal_recovery(img).0 == uncommitted
            })
            .map(|(p, _)| p)
            .collect();
        match cache {
            // the flag and the log are separate lines, either may reach PM first
            CacheMode::Volatile => {
                let point = in_first_interval.first().expect("the bug is found");
                let explored = point.explored.as_ref().unwrap();
                assert_eq!(explored.from_previous, vec![0x00], "{explored:?}");
                assert_eq!(explored.explored, vec![0x00, 0x40]);
            }
            // the store buffer drains in order: the flag is cleared before the log changes
            CacheMode::Persistent => assert!(in_first_interval.is_empty()),
        }
    }
}

/// The thesis' Figure 8.12: `reads` takes a line's NT stores all or nothing, so the 16-byte
/// value is never torn; with NT prefixes it is, as in the exact set.
#[test]
fn nt_prefixes_show_a_value_torn_between_two_nt_stores() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nt-split-update.trace");
    let (header, entries) = read_all(&path).unwrap();
    let torn = |img: &Vec<u8>| img[0x100..0x108] == [0x11; 8] && img[0x108..0x110] == [0; 8];
    for cache in [CacheMode::Volatile, CacheMode::Persistent] {
        let found = |nt_prefixes: bool| {
            let mut config = Config::new(header.pm_size);
            config.cache = cache;
            config.strategy = Strategy::Reads;
            config.nt_prefixes = nt_prefixes;
            let initial = vec![0; header.pm_size as usize];
            let points =
                persim_model::replay_in_memory_guided(config, initial, &entries, &mut |_| {
                    Some(vec![0x100, 0x108])
                })
                .unwrap();
            let found = images(&points).any(|(_, img)| torn(img));
            found
        };
        assert!(!found(false), "{cache:?}: all or nothing by default");
        assert!(found(true), "{cache:?}: the NT prefix is explored");
        let exact = replay("nt-split-update.trace", cache, Strategy::Exhaustive);
        assert!(images(&exact).any(|(_, img)| torn(img)));
    }
}

/// `reads` explores a dirty line only when recovery reads one of its pending words: a
/// library's run-time field next to a persistent one in the same line (PMDK's pool
/// descriptor) does not make the line worth reordering.
#[test]
fn reads_skips_a_line_whose_pending_words_recovery_does_not_read() {
    let entries = vec![
        Entry::from(Op::Write {
            addr: 0x48,
            data: vec![7; 8],
            nt: false,
        }),
        Entry::from(Op::Write {
            addr: 0x80,
            data: vec![9; 8],
            nt: false,
        }),
        Entry::from(Op::Fence(FenceKind::Sfence)),
    ];
    let explored = |words: Vec<u64>| {
        let mut config = Config::new(0x1000);
        config.strategy = Strategy::Reads;
        let points =
            persim_model::replay_in_memory_guided(config, vec![0; 0x1000], &entries, &mut |_| {
                Some(words.clone())
            })
            .unwrap();
        points[0].explored.clone().unwrap()
    };
    // the persistent field at 0x40 is read, the pending run-time one at 0x48 is not
    let split = explored(vec![0x40, 0x80]);
    assert_eq!((split.explored, split.skipped), (vec![0x80], vec![0x40]));
    let split = explored(vec![0x48]);
    assert_eq!((split.explored, split.skipped), (vec![0x40], vec![0x80]));
}

/// Suvi-Fast on a loop that persists four records through one helper: the helper's flush
/// and fence are failure points once (their code location repeats), each with the one
/// image that applies every pending store; checkpoints keep both ends.
#[test]
fn fast_takes_one_image_per_new_code_location() {
    let mut text =
        String::from("# persim-trace pm-size=0x1000\nhypercall start\nhypercall checkpoint 1\n");
    for record in 0..4u64 {
        let addr = 0x100 + record * 0x40;
        text.push_str(&format!(
            "write {addr:#x} 0{record} @ pc=0x10 stack=0x99\n\
             flush clwb {addr:#x} @ pc=0x20 stack=0x99\n\
             fence sfence @ pc=0x30 stack=0x99\n"
        ));
    }
    // the same helper called from elsewhere is a new location
    text.push_str("write 0x300 aa @ pc=0x10 stack=0x77\nflush clwb 0x300 @ pc=0x20 stack=0x77\n");
    text.push_str("hypercall checkpoint 2\nhypercall success\n");
    let entries: Vec<Entry> = persim_trace::Reader::new(std::io::Cursor::new(text))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let points = replay_entries(&entries, 0x1000, CacheMode::Volatile, Strategy::Fast);
    let summary: Vec<(u64, FailureKind, usize)> = points
        .iter()
        .map(|p| (p.point.index, p.point.kind, p.images.len()))
        .collect();
    assert_eq!(
        summary,
        [
            (1, FailureKind::Checkpoint, 1),
            (3, FailureKind::Flush, 1),
            (4, FailureKind::Fence, 1),
            (15, FailureKind::Flush, 1),
            (16, FailureKind::Checkpoint, 2),
            (18, FailureKind::End, 2),
        ]
    );
    // the one image at a flush or fence applies every pending store
    let at_flush = &points[1].images[0];
    assert_eq!(
        (at_flush.0[0x100], &at_flush.1),
        (0x00, &Choice::Everything)
    );
    let at_last_flush = &points[3].images[0];
    assert_eq!(at_last_flush.0[0x300], 0xaa);
    // the final checkpoint keeps "nothing" too: the unfenced record can be lost
    assert_eq!(points[4].images[0].0[0x300], 0);
}

/// A program's statistics line, declared run-time data (`hypercall volatile`), follows the
/// cut under `global-prefix`: the persistent lines' subsets are all still there, none is
/// repeated with the statistics line's other end, and `exhaustive` still explores it.
#[test]
fn global_prefix_lets_declared_run_time_data_follow_the_cut() {
    let trace = |declared: bool| {
        let mut text = String::from("# persim-trace pm-size=0x1000\nhypercall start\n");
        if declared {
            text.push_str("hypercall volatile 0x200 0x40\n");
        }
        text.push_str(
            "write 0x100 11\nwrite 0x200 01\nwrite 0x140 22\nwrite 0x208 02\n\
             write 0x180 33\nfence sfence\n",
        );
        let entries: Vec<Entry> = persim_trace::Reader::new(std::io::Cursor::new(text))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        entries
    };
    let at_fence = |declared: bool, strategy: Strategy| {
        let points = replay_entries(&trace(declared), 0x1000, CacheMode::Volatile, strategy);
        distinct_at_first_fence(points)
    };
    let persistent_part = |img: &Vec<u8>| [img[0x100], img[0x140], img[0x180]];
    let plain = at_fence(false, Strategy::GlobalPrefix);
    let declared = at_fence(true, Strategy::GlobalPrefix);
    assert!(
        declared.len() < plain.len(),
        "{} vs {}",
        declared.len(),
        plain.len()
    );
    let parts = |images: &[Vec<u8>]| {
        let mut parts: Vec<[u8; 3]> = images.iter().map(persistent_part).collect();
        parts.sort();
        parts.dedup();
        parts
    };
    assert_eq!(parts(&declared), parts(&plain));
    // it follows the cut, never raised on its own: its last store (after the second
    // persistent one) is there only in images past every persistent store
    let last_statistic = |images: &[Vec<u8>]| -> Vec<[u8; 3]> {
        images
            .iter()
            .filter(|img| img[0x208] == 2)
            .map(persistent_part)
            .collect()
    };
    assert_eq!(last_statistic(&declared), [[0x11, 0x22, 0x33]]);
    assert!(last_statistic(&plain).contains(&[0, 0, 0]));
    assert_eq!(
        at_fence(true, Strategy::Exhaustive),
        at_fence(false, Strategy::Exhaustive)
    );
}

/// Under `reads`, a declared line is skipped even when recovery reads it: the declaration
/// is the program's promise that its value does not matter after a crash.
#[test]
fn reads_skips_declared_run_time_data_that_recovery_reads() {
    let text = "# persim-trace pm-size=0x1000\nhypercall volatile 0x80 0x40\n\
                write 0x40 01\nwrite 0x80 02\nfence sfence\n";
    let entries: Vec<Entry> = persim_trace::Reader::new(std::io::Cursor::new(text))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut config = Config::new(0x1000);
    config.strategy = Strategy::Reads;
    let points =
        persim_model::replay_in_memory_guided(config, vec![0; 0x1000], &entries, &mut |_| {
            Some(vec![0x40, 0x80])
        })
        .unwrap();
    let split = points[0].explored.clone().unwrap();
    assert_eq!((split.explored, split.skipped), (vec![0x40], vec![0x80]));
}

#[test]
fn streaming_the_images_yields_what_collecting_them_does() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/journal.trace");
    let (header, entries) = read_all(&path).unwrap();
    for cache in [CacheMode::Volatile, CacheMode::Persistent] {
        let mut config = Config::new(header.pm_size);
        config.cache = cache;
        let initial = vec![0; header.pm_size as usize];
        let collected = replay_in_memory(config.clone(), initial.clone(), &entries).unwrap();
        let mut streamed = Vec::new();
        let counts = persim_model::for_each_crash_image(config, initial, &entries, |p, img, c| {
            streamed.push((p, img.to_vec(), c.clone()));
        })
        .unwrap();
        let want: Vec<_> = collected
            .iter()
            .flat_map(|p| {
                p.images
                    .iter()
                    .map(|(img, c, _)| (p.point, img.clone(), c.clone()))
            })
            .collect();
        assert_eq!(streamed, want);
        assert_eq!(
            (counts.points, counts.images),
            (collected.len(), want.len())
        );
    }
}

/// An entry of two lines and its commit line, written with NT stores and no fence in
/// between (DPWC's mutant 1): `single-line` gives, at the fence, nothing, everything, each
/// line alone durable and each alone lost, in both cache modes (NT stores wait in
/// write-combining buffers either way), so the torn entry under a durable commit is
/// always among them, and nothing else is.
#[test]
fn single_line_persists_each_line_alone_and_loses_each_alone() {
    let text = "# persim-trace pm-size=0x1000\n\
                ntwrite 0x100 11\nntwrite 0x140 22\nntwrite 0x180 33\nfence sfence\n";
    let entries: Vec<Entry> = persim_trace::Reader::new(std::io::Cursor::new(text))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for cache in [CacheMode::Volatile, CacheMode::Persistent] {
        let points = replay_entries(&entries, 0x1000, cache, Strategy::SingleLine);
        let fence = points
            .iter()
            .find(|p| p.point.kind == FailureKind::Fence)
            .unwrap();
        assert!(!fence.incomplete);
        let mut got: Vec<[u8; 3]> = fence
            .images
            .iter()
            .map(|(img, _, _)| [img[0x100], img[0x140], img[0x180]])
            .collect();
        got.sort();
        let (a, b, c) = (0x11, 0x22, 0x33);
        let mut expected = vec![
            [0, 0, 0],
            [a, 0, 0],
            [0, b, 0],
            [0, 0, c],
            [0, b, c],
            [a, 0, c],
            [a, b, 0],
            [a, b, c],
        ];
        expected.sort();
        assert_eq!(got, expected, "{cache}");
        let alone_lost = fence
            .images
            .iter()
            .find(|(img, _, _)| [img[0x100], img[0x140], img[0x180]] == [a, 0, c]);
        assert_eq!(
            alone_lost.map(|(_, choice, _)| choice),
            Some(&Choice::SingleLine {
                line: 0x140,
                persisted: false
            })
        );
    }
}

/// Above `--max-images`, `single-line` takes a seeded sample that keeps both ends and
/// flags the failure point incomplete.
#[test]
fn single_line_samples_above_the_cap_and_keeps_both_ends() {
    let mut text = String::from("# persim-trace pm-size=0x1000\n");
    for line in 0..16 {
        text.push_str(&format!("ntwrite {:#x} 11\n", line * 0x40));
    }
    text.push_str("fence sfence\n");
    let entries: Vec<Entry> = persim_trace::Reader::new(std::io::Cursor::new(text))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let fence = |max_images: usize| {
        let mut config = Config::new(0x1000);
        config.strategy = Strategy::SingleLine;
        config.max_images = max_images;
        let points = replay_in_memory(config, vec![0; 0x1000], &entries).unwrap();
        points
            .into_iter()
            .find(|p| p.point.kind == FailureKind::Fence)
            .unwrap()
    };
    let all = fence(100);
    assert_eq!((all.images.len(), all.incomplete), (2 + 2 * 16, false));
    let sampled = fence(10);
    assert_eq!((sampled.images.len(), sampled.incomplete), (10, true));
    let choices: Vec<&Choice> = sampled.images.iter().map(|(_, c, _)| c).collect();
    assert_eq!(choices[..2], [&Choice::Nothing, &Choice::Everything]);
    let again: Vec<Choice> = fence(10).images.into_iter().map(|(_, c, _)| c).collect();
    assert_eq!(choices, again.iter().collect::<Vec<_>>());
}

/// Under the `program` scope, a PM program's own lines (stored from user space) are
/// explored and the kernel's lines in other pages (a file system's journal under the pool
/// file) follow the cut: every subset of the program's lines is still there, fewer images
/// in all; a trace with no user-space access (a file-system test) is explored whole.
#[test]
fn program_scope_lets_the_kernels_lines_follow_the_cut() {
    let user = "@ pc=0x555555557d21";
    let kernel = "@ pc=0xffffffff819fa292";
    let trace = |with_program: bool| {
        let mut text = String::from("# persim-trace pm-size=0x4000\nhypercall start\n");
        let who = if with_program { user } else { kernel };
        for (addr, byte) in [(0x100, 0x11), (0x140, 0x22), (0x180, 0x33)] {
            text.push_str(&format!("write {addr:#x} {byte:02x} {who}\n"));
            text.push_str(&format!("write {:#x} {byte:02x} {kernel}\n", addr + 0x1f00));
        }
        text.push_str("fence sfence\n");
        persim_trace::Reader::new(std::io::Cursor::new(text))
            .unwrap()
            .collect::<Result<Vec<Entry>, _>>()
            .unwrap()
    };
    let at_fence = |with_program: bool, scope: Scope| {
        let mut config = Config::new(0x4000);
        config.strategy = Strategy::GlobalPrefix;
        config.scope = scope;
        let points = replay_in_memory(config, vec![0; 0x4000], &trace(with_program)).unwrap();
        distinct_at_first_fence(points)
    };
    let program_part = |images: &[Vec<u8>]| {
        let mut parts: Vec<[u8; 3]> = images
            .iter()
            .map(|img| [img[0x100], img[0x140], img[0x180]])
            .collect();
        parts.sort();
        parts.dedup();
        parts
    };
    let scoped = at_fence(true, Scope::Program);
    let all = at_fence(true, Scope::All);
    assert!(
        scoped.len() < all.len(),
        "{} vs {}",
        scoped.len(),
        all.len()
    );
    assert_eq!(program_part(&scoped), program_part(&all));
    assert_eq!(
        program_part(&scoped).len(),
        8,
        "every subset of the 3 lines"
    );
    // the kernel's last store is durable only in images past every program store
    let kernel_last: Vec<[u8; 3]> = scoped
        .iter()
        .filter(|img| img[0x2080] == 0x33)
        .map(|img| [img[0x100], img[0x140], img[0x180]])
        .collect();
    assert!(kernel_last.iter().all(|p| p[2] == 0x33), "{kernel_last:?}");
    assert_eq!(
        at_fence(false, Scope::Program),
        at_fence(false, Scope::All),
        "no program: every line is explored"
    );
}

/// Under `reads` with the `program` scope, a kernel line outside the program's PM is
/// skipped even when recovery reads it, and listed as skipped.
#[test]
fn reads_skips_the_kernels_lines_outside_the_programs_pm() {
    let text = "# persim-trace pm-size=0x4000\n\
                write 0x40 01 @ pc=0x7ffff7f8b90a\n\
                write 0x2000 02 @ pc=0xffffffff813d864d\n\
                fence sfence\n";
    let entries: Vec<Entry> = persim_trace::Reader::new(std::io::Cursor::new(text))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (scope, want) in [
        (Scope::Program, (vec![0x40], vec![0x2000])),
        (Scope::All, (vec![0x40, 0x2000], vec![])),
    ] {
        let mut config = Config::new(0x4000);
        config.strategy = Strategy::Reads;
        config.scope = scope;
        let points =
            persim_model::replay_in_memory_guided(config, vec![0; 0x4000], &entries, &mut |_| {
                Some(vec![0x40, 0x2000])
            })
            .unwrap();
        let split = points[0].explored.clone().unwrap();
        assert_eq!((split.explored, split.skipped), want, "{scope}");
    }
}
