//! The code behind each violation, for reports: which stores a crash can still lose at a
//! checkpoint that has several final states, and which stores came last before the failure
//! points where an extra state (or a failed recovery) arises, counted per call site and
//! named through the trace's symbols (`function+0xoff [module] < caller …`). With a disk,
//! also the disk writes not yet flushed there (for a state from the disk, only those): a
//! missing flush shows as the writes it should have made durable, named by the code that
//! issued them beyond the block layer.
//!
//! Culprits come most relevant first ([`Relevance`]): a store of the same bytes PM already
//! holds durably (a library rewriting its run-time data on every open) cannot tell crash
//! images apart, so stores that change their line's bytes come before it, and lines the
//! program declared run-time data come last, apart.

use crate::verdict::{CheckpointVerdict, Media};
use persim_model::{Config, Replay};
use persim_model::{FailureView, Sink};
use persim_trace::{Entry, Hypercall, Meta, Op, Symbols, TraceError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One call site behind a violation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Culprit {
    /// What the stores at this site did, e.g. `not flushed at checkpoint 2` or `last
    /// stores before failure point 1200 (state c1s3)`.
    pub what: String,
    /// The storing instruction and its callers, innermost first, as far as recorded.
    pub site: String,
    pub stores: usize,
    /// Trace indices of the first few of these stores.
    pub entries: Vec<u64>,
    /// The cache lines they wrote (PM offsets), or for disk writes their byte offsets.
    pub lines: Vec<u64>,
    /// Whether these are disk writes (`blkwrite`), not PM stores.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disk: bool,
    /// How much these stores can matter, the most of any of them.
    #[serde(default, skip_serializing_if = "Relevance::is_unknown")]
    pub relevance: Relevance,
}

/// How much a pending store can matter where it is named: whether its line can differ
/// between the crash images of that failure point. Ordered most relevant first.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Relevance {
    /// A pending store of its line writes bytes other than the durable ones: images with
    /// and without it differ in the line.
    Changes,
    /// Not known: a disk write, or a store no longer pending there.
    #[default]
    Unknown,
    /// Every pending store of its line writes the bytes PM already holds durably: the line
    /// is the same in every image there.
    Rewrites,
    /// The line holds only run-time data the program declared (`persim_volatile`).
    RuntimeData,
}

impl Relevance {
    fn is_unknown(&self) -> bool {
        *self == Relevance::Unknown
    }
}

/// Entries and lines kept per culprit; the count says how many there were.
const EXAMPLES: usize = 4;
/// Frames of a site shown: the storing function and its closest callers.
const FRAMES: usize = 4;
/// Stores shown before a failure point of an extra state.
const LAST_STORES: usize = 3;

/// A store (or disk write) found behind a violation, before its call site is known.
struct Suspect {
    what: String,
    /// The failure point (trace index) it is named at.
    point: u64,
    entry: u64,
    line: u64,
    disk: bool,
}

/// Fills `culprits` of every violated interval in `checkpoints` from the trace (read twice:
/// `entries()` opens it) replayed with the run's `config` from the PM image `initial` (the
/// recorded `TRACE.initial`; None: zeros). `focus` gives, per failure point (trace index),
/// the only lines that can matter there (`reads`: the lines recovery reads); stores to
/// other lines are left out, and counted in one culprit of their own.
pub fn find_culprits<I>(
    mut entries: impl FnMut() -> Result<I, TraceError>,
    config: Config,
    initial: Option<&Path>,
    checkpoints: &mut [CheckpointVerdict],
    symbols: Option<&Symbols>,
    focus: &BTreeMap<u64, BTreeSet<u64>>,
) -> Result<(), persim_inspect::DebugError>
where
    I: IntoIterator<Item = Result<Entry, TraceError>>,
{
    use persim_inspect::DebugError;
    // Where to look, by trace index: the final failure point of an interval with several
    // final states; the first failure point of each extra state (not the interval's first
    // state), unless it is a final state that arises only there (the checkpoint explains
    // it). One that is final and arose earlier gets both: the stores before its first
    // failure point made it, whatever the checkpoint leaves pending.
    let mut at_checkpoint: BTreeMap<u64, usize> = BTreeMap::new();
    let mut at_point: BTreeMap<u64, Vec<(usize, String, DiskPart)>> = BTreeMap::new();
    for (i, c) in checkpoints.iter().enumerate() {
        if !c.single_final_state {
            at_checkpoint.insert(c.to, i);
        }
        let final_point = c.states.iter().flat_map(|s| &s.failure_points).max();
        // a state whose recovery failed counts too: the stores before it broke recovery
        for s in c.states.iter().skip(1) {
            let explained = c.single_final_state || s.failure_points.first() == final_point;
            if c.final_states.contains(&s.name) && explained {
                continue;
            }
            if let Some(&point) = s.failure_points.first() {
                let disk = DiskPart::of(&s.media);
                at_point
                    .entry(point)
                    .or_default()
                    .push((i, s.name.clone(), disk));
            }
        }
    }
    if at_checkpoint.is_empty() && at_point.is_empty() {
        return Ok(());
    }

    let mut suspects: Vec<Vec<Suspect>> = checkpoints.iter().map(|_| Vec::new()).collect();
    let mut ignored = vec![0; checkpoints.len()];
    let pm_size = config.pm_size;
    let mut replay = Replay::new(config);
    let mut durable = Durable::new(initial, pm_size).map_err(|e| DebugError::Model(e.into()))?;
    let mut last_stores: VecDeque<(u64, u64)> = VecDeque::new();
    // Disk writes since the last disk flush: (trace index, offset).
    let mut unflushed: Vec<(u64, u64)> = Vec::new();
    for (index, entry) in entries()
        .map_err(DebugError::Trace)?
        .into_iter()
        .enumerate()
    {
        let (index, entry) = (index as u64, entry.map_err(DebugError::Trace)?);
        durable.wanted = at_point.contains_key(&index);
        if let Op::Hypercall(Hypercall::Checkpoint(n)) = entry.op {
            if let Some(&i) = at_checkpoint.get(&n) {
                durable.wanted = true;
                let read = focus.get(&index);
                for line in replay.pending_lines() {
                    if read.is_some_and(|lines| !lines.contains(&line.line)) {
                        ignored[i] += line.units().len();
                        continue;
                    }
                    for (k, unit) in line.units().iter().enumerate() {
                        let how = match (unit.nt, k < line.flush_mark()) {
                            (true, _) => "non-temporal, not fenced",
                            (false, true) => "flushed, not fenced",
                            (false, false) => "not flushed",
                        };
                        suspects[i].push(Suspect {
                            what: format!("{how} at checkpoint {n}"),
                            point: index,
                            entry: unit.entry,
                            line: line.line,
                            disk: false,
                        });
                    }
                }
                for &(entry, offset) in &unflushed {
                    suspects[i].push(Suspect {
                        what: format!("disk writes not flushed at checkpoint {n}"),
                        point: index,
                        entry,
                        line: offset,
                        disk: true,
                    });
                }
            }
        }
        for (i, state, disk) in at_point.get(&index).into_iter().flatten() {
            if *disk != DiskPart::Only {
                for &(entry, line) in last_stores.iter().rev() {
                    suspects[*i].push(Suspect {
                        what: format!("last stores before failure point {index} (state {state})"),
                        point: index,
                        entry,
                        line,
                        disk: false,
                    });
                }
            }
            if *disk != DiskPart::None {
                for &(entry, offset) in &unflushed {
                    suspects[*i].push(Suspect {
                        what: format!(
                            "disk writes not flushed at failure point {index} (state {state})"
                        ),
                        point: index,
                        entry,
                        line: offset,
                        disk: true,
                    });
                }
            }
        }
        match entry.op {
            Op::Write { addr, .. } => {
                if last_stores.len() == LAST_STORES {
                    last_stores.pop_front();
                }
                last_stores.push_back((index, addr & !(persim_model::LINE - 1)));
            }
            Op::BlkWrite { offset, .. } => unflushed.push((index, offset)),
            Op::BlkFlush => unflushed.clear(),
            _ => {}
        }
        replay
            .step(&entry, &mut durable)
            .map_err(DebugError::Model)?;
    }

    let wanted: BTreeSet<u64> = suspects.iter().flatten().map(|s| s.entry).collect();
    let mut metas: HashMap<u64, Meta> = HashMap::new();
    for (index, entry) in entries()
        .map_err(DebugError::Trace)?
        .into_iter()
        .enumerate()
    {
        let index = index as u64;
        if wanted.contains(&index) {
            metas.insert(index, entry.map_err(DebugError::Trace)?.meta);
        }
    }
    for ((c, suspects), ignored) in checkpoints.iter_mut().zip(suspects).zip(ignored) {
        c.culprits = group(suspects, &durable.relevance, |entry, disk| {
            site(metas.get(&entry), symbols, disk)
        });
        if ignored > 0 {
            c.culprits.push(Culprit {
                what: format!(
                    "not durable at checkpoint {}, on lines recovery never reads",
                    c.to
                ),
                site: "any".to_owned(),
                stores: ignored,
                entries: Vec::new(),
                lines: Vec::new(),
                disk: false,
                relevance: Relevance::Unknown,
            });
        }
    }
    Ok(())
}

/// The replay's sink: the durable bytes of the PM lines it touched, over the image the
/// trace starts from, and at the failure points where culprits are named (`wanted` before
/// their entry is replayed) how relevant each pending line is.
struct Durable {
    initial: Option<std::fs::File>,
    pm_size: u64,
    lines: HashMap<u64, [u8; LINE]>,
    wanted: bool,
    /// (failure point, line) -> its relevance there.
    relevance: HashMap<(u64, u64), Relevance>,
}

const LINE: usize = persim_model::LINE as usize;

impl Durable {
    fn new(initial: Option<&Path>, pm_size: u64) -> io::Result<Durable> {
        Ok(Durable {
            initial: initial.map(std::fs::File::open).transpose()?,
            pm_size,
            lines: HashMap::new(),
            wanted: false,
            relevance: HashMap::new(),
        })
    }

    /// The durable bytes of the line at `line`, read from the initial image when first
    /// needed.
    fn line(&mut self, line: u64) -> io::Result<&mut [u8; LINE]> {
        if !self.lines.contains_key(&line) {
            let mut bytes = [0; LINE];
            if let Some(file) = &self.initial {
                file.read_exact_at(&mut bytes, line)?;
            }
            self.lines.insert(line, bytes);
        }
        Ok(self.lines.get_mut(&line).expect("inserted above"))
    }
}

impl Sink for Durable {
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        // a unit lies in one line; the disk's writes (past PM) are not compared
        if offset < self.pm_size {
            let at = (offset % LINE as u64) as usize;
            self.line(offset - at as u64)?[at..at + bytes.len()].copy_from_slice(bytes);
        }
        Ok(())
    }

    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()> {
        if !self.wanted {
            return Ok(());
        }
        let runtime: BTreeSet<u64> = view.runtime_lines().collect();
        for line in view.pending_lines() {
            let relevance = if runtime.contains(&line.line) {
                Relevance::RuntimeData
            } else {
                let durable = *self.line(line.line)?;
                let changes = line.units().iter().any(|u| {
                    let at = (u.addr - line.line) as usize;
                    durable[at..at + u.bytes().len()] != *u.bytes()
                });
                match changes {
                    true => Relevance::Changes,
                    false => Relevance::Rewrites,
                }
            };
            self.relevance
                .insert((view.point.index, line.line), relevance);
        }
        Ok(())
    }
}

/// The site of stores recorded without a pc (hand-written traces).
pub(crate) const UNKNOWN_SITE: &str = "unknown code (no pc recorded)";

/// What a state's media say about the disk, as the culprits need it: a state only from
/// the disk gets its unflushed disk writes and no PM stores; one with a disk part, both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DiskPart {
    None,
    Also,
    Only,
}

impl DiskPart {
    fn of(media: &[Media]) -> DiskPart {
        if !media.is_empty() && media.iter().all(|m| *m == Media::Disk) {
            DiskPart::Only
        } else if media
            .iter()
            .any(|m| matches!(m, Media::Disk | Media::PmAndDisk))
        {
            DiskPart::Also
        } else {
            DiskPart::None
        }
    }
}

/// `function+0xoff [module] < caller …`, or the hex pc without symbols. A disk write's
/// first frames are the NVMe driver and the block layer, the same for every write: its
/// site starts at the first frame beyond them (the code that wrote the data back or
/// submitted it).
fn site(meta: Option<&Meta>, symbols: Option<&Symbols>, disk: bool) -> String {
    let Some(meta) = meta.filter(|m| !m.is_empty()) else {
        return UNKNOWN_SITE.to_owned();
    };
    let frames: Vec<u64> = meta.pc.iter().chain(&meta.stack).copied().collect();
    let names: Vec<String> = match symbols {
        Some(symbols) => symbols.describe_frames(&frames),
        None => frames.iter().map(|a| format!("{a:#x}")).collect(),
    };
    let skip = match disk {
        true => names
            .iter()
            .position(|name| !in_block_layer(name))
            .unwrap_or(0),
        false => 0,
    };
    names[skip..]
        .iter()
        .take(FRAMES)
        .cloned()
        .collect::<Vec<_>>()
        .join(" < ")
}

/// Whether a described frame is Linux's NVMe driver or block layer.
fn in_block_layer(frame: &str) -> bool {
    frame.ends_with(" [nvme]")
        || frame.ends_with(" [nvme_core]")
        || ["blk_", "__blk_", "nvme_", "submit_bio", "__submit_bio"]
            .iter()
            .any(|prefix| frame.starts_with(prefix))
}

/// Suspects counted per (what, site), most relevant first (`relevance` of their lines at
/// their failure points), else in the order first seen; stores to declared run-time data
/// are a kind of their own.
fn group(
    suspects: Vec<Suspect>,
    relevance: &HashMap<(u64, u64), Relevance>,
    site_of: impl Fn(u64, bool) -> String,
) -> Vec<Culprit> {
    let mut culprits: Vec<Culprit> = Vec::new();
    for s in suspects {
        let site = site_of(s.entry, s.disk);
        let rank = match s.disk {
            true => Relevance::Unknown,
            false => relevance
                .get(&(s.point, s.line))
                .copied()
                .unwrap_or_default(),
        };
        let what = match rank {
            Relevance::RuntimeData => format!("{}, declared run-time data", s.what),
            _ => s.what,
        };
        let at = culprits
            .iter()
            .position(|c| c.what == what && c.site == site);
        let c = match at {
            Some(at) => &mut culprits[at],
            None => {
                culprits.push(Culprit {
                    what,
                    site,
                    stores: 0,
                    entries: Vec::new(),
                    lines: Vec::new(),
                    disk: s.disk,
                    relevance: rank,
                });
                culprits.last_mut().expect("just pushed")
            }
        };
        c.relevance = c.relevance.min(rank);
        c.stores += 1;
        if c.entries.len() < EXAMPLES && !c.entries.contains(&s.entry) {
            c.entries.push(s.entry);
        }
        if c.lines.len() < EXAMPLES && !c.lines.contains(&s.line) {
            c.lines.push(s.line);
        }
    }
    culprits.sort_by_key(|c| c.relevance);
    culprits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StateInfo;
    use persim_state::Outcome;
    use persim_trace::Reader;

    const TRACE: &str = "\
# persim-trace pm-size=0x1000
hypercall start
hypercall checkpoint 1
write 0x40 01 @ pc=0xffffffffc0250104 stack=0xffffffffc0300010
write 0x48 02 @ pc=0xffffffffc0250104 stack=0xffffffffc0300010
write 0x80 03 @ pc=0x401000
flush clwb 0x80
fence sfence
write 0xc0 04 @ pc=0x401000
flush clwb 0xc0
hypercall checkpoint 2
hypercall success
";

    fn state(name: &str, failure_points: &[u64]) -> StateInfo {
        StateInfo::recovered(name, failure_points.to_vec(), "h")
    }

    fn verdict(states: Vec<StateInfo>, final_states: &[&str]) -> CheckpointVerdict {
        CheckpointVerdict {
            from: 1,
            to: 2,
            final_states: final_states.iter().map(|s| s.to_string()).collect(),
            single_final_state: final_states.len() == 1,
            atomic: false,
            states,
            errors: Vec::new(),
            culprits: Vec::new(),
            invariant: None,
            reference: None,
            expected: None,
        }
    }

    fn culprits(c: CheckpointVerdict, symbols: Option<&Symbols>) -> Vec<Culprit> {
        culprits_with(c, symbols, &BTreeMap::new())
    }

    fn culprits_with(
        mut c: CheckpointVerdict,
        symbols: Option<&Symbols>,
        focus: &BTreeMap<u64, BTreeSet<u64>>,
    ) -> Vec<Culprit> {
        let open = || Reader::new(std::io::Cursor::new(TRACE));
        let config = Config::new(0x1000);
        find_culprits(
            open,
            config,
            None,
            std::slice::from_mut(&mut c),
            symbols,
            focus,
        )
        .unwrap();
        c.culprits
    }

    #[test]
    fn several_final_states_name_the_stores_not_durable_at_the_checkpoint() {
        let symbols = Symbols::from_kallsyms(
            "ffffffffc0250100 T ext4_write_begin\t[ext4]\n\
             ffffffffc0300000 t jbd2_journal_commit_transaction\t[jbd2]\n",
        );
        let c = verdict(
            vec![state("c1s0", &[2, 9]), state("c1s1", &[9])],
            &["c1s0", "c1s1"],
        );
        let found = culprits(c, Some(&symbols));
        let summary: Vec<(&str, &str, usize, &[u64])> = found
            .iter()
            .map(|c| {
                (
                    c.what.as_str(),
                    c.site.as_str(),
                    c.stores,
                    c.entries.as_slice(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "not flushed at checkpoint 2",
                    "ext4_write_begin+0x4 [ext4] < jbd2_journal_commit_transaction+0x10 [jbd2]",
                    2,
                    &[2u64, 3][..]
                ),
                (
                    "flushed, not fenced at checkpoint 2",
                    "0x401000",
                    1,
                    &[7u64][..]
                ),
            ]
        );
        assert_eq!(found[0].lines, [0x40]);
    }

    /// A journal-like run with a disk: data written to the disk from writeback, the commit
    /// on PM, and the disk flushed only at the end.
    fn disk_trace() -> String {
        let data = "00".repeat(512);
        format!(
            "\
# persim-trace pm-size=0x1000 blk-size=0x1000
hypercall start
hypercall checkpoint 1
blkwrite 0x200 {data} @ pc=0xffffffffc0400010 stack=0xffffffff81000110,0xffffffff81000210,0xffffffff81000310
write 0x40 01 @ pc=0xffffffffc0300010
flush clwb 0x40
fence sfence
blkflush
hypercall checkpoint 2
hypercall success
"
        )
    }

    #[test]
    fn a_state_from_the_disk_names_the_unflushed_disk_writes_beyond_the_block_layer() {
        let symbols = Symbols::from_kallsyms(
            "ffffffff81000100 T blk_finish_plug\n\
             ffffffff81000200 T wb_writeback\n\
             ffffffff81000300 T wb_workfn\n\
             ffffffffc0300000 t jbd2_journal_commit_transaction\t[jbd2]\n\
             ffffffffc0400000 t nvme_queue_rq\t[nvme]\n",
        );
        let find = |trace: &str, mut c: CheckpointVerdict| {
            let open = || Reader::new(std::io::Cursor::new(trace.to_owned()));
            let config = Config {
                blk_size: 0x1000,
                ..Config::new(0x1000)
            };
            let empty = BTreeMap::new();
            find_culprits(
                open,
                config,
                None,
                std::slice::from_mut(&mut c),
                Some(&symbols),
                &empty,
            )
            .unwrap();
            c.culprits
        };
        let states = |c1s1: StateInfo| vec![state("c1s0", &[1]), c1s1, state("c1s2", &[7])];
        let mut disk_state = state("c1s1", &[6, 7]);
        disk_state.media = vec![Media::Disk];
        let found = find(&disk_trace(), verdict(states(disk_state), &["c1s2"]));
        // Only the disk write the disk flush's image leaves out: no PM stores for this state.
        assert_eq!(found.len(), 1, "{found:#?}");
        let disk = &found[0];
        assert_eq!(
            disk.what,
            "disk writes not flushed at failure point 6 (state c1s1)"
        );
        assert_eq!(disk.site, "wb_writeback+0x10 < wb_workfn+0x10");
        assert_eq!(
            (disk.disk, disk.entries.as_slice(), disk.lines.as_slice()),
            (true, &[2u64][..], &[0x200u64][..])
        );

        // Without a disk medium the same state gets the PM stores before the disk flush.
        let found = find(
            &disk_trace(),
            verdict(states(state("c1s1", &[6, 7])), &["c1s2"]),
        );
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(!found[0].disk);
        assert_eq!(found[0].entries, [3]);

        // Never flushed: two final states, and the checkpoint names the disk write.
        let unflushed = disk_trace().replace("blkflush\n", "");
        let found = find(
            &unflushed,
            verdict(
                vec![state("c1s0", &[1, 6]), state("c1s1", &[6])],
                &["c1s0", "c1s1"],
            ),
        );
        let disk: Vec<&Culprit> = found.iter().filter(|c| c.disk).collect();
        assert_eq!(disk.len(), 1, "{found:#?}");
        assert_eq!(disk[0].what, "disk writes not flushed at checkpoint 2");
        assert_eq!(disk[0].entries, [2]);
    }

    #[test]
    fn an_extra_state_names_the_last_stores_before_its_first_failure_point() {
        // c1s1 (not final) first arises at the fence (entry 6): the stores before it.
        let c = verdict(
            vec![
                state("c1s0", &[1]),
                state("c1s1", &[6, 7]),
                state("c1s2", &[10]),
            ],
            &["c1s2"],
        );
        let found = culprits(c, None);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(
            found[0].what,
            "last stores before failure point 6 (state c1s1)"
        );
        assert_eq!(
            (found[0].site.as_str(), found[0].entries.as_slice()),
            ("0x401000", &[4u64][..])
        );
        assert_eq!(found[1].site, "0xffffffffc0250104 < 0xffffffffc0300010");
        assert_eq!(
            (found[1].stores, found[1].entries.as_slice()),
            (2, &[3u64, 2][..])
        );
    }

    #[test]
    fn lines_recovery_never_reads_are_counted_apart() {
        let c = verdict(
            vec![state("c1s0", &[2, 9]), state("c1s1", &[9])],
            &["c1s0", "c1s1"],
        );
        let focus = BTreeMap::from([(9, BTreeSet::from([0xc0]))]);
        let found = culprits_with(c, None, &focus);
        let summary: Vec<(&str, usize)> =
            found.iter().map(|c| (c.site.as_str(), c.stores)).collect();
        assert_eq!(summary, [("0x401000", 1), ("any", 2)], "{found:#?}");
        assert_eq!(found[0].entries, [7]);
    }

    #[test]
    fn a_failed_recovery_names_the_stores_before_it() {
        let mut c = verdict(
            vec![
                state("c1s0", &[1]),
                state("c1s1", &[6]),
                state("c1s2", &[10]),
            ],
            &["c1s2"],
        );
        c.errors.push(crate::ErrorInfo {
            state: "c1s1".into(),
            outcome: Outcome::RecoveryError,
            output: "Structure needs cleaning".into(),
        });
        let found = culprits(c, None);
        assert_eq!(
            found[0].what,
            "last stores before failure point 6 (state c1s1)"
        );
    }

    /// A library's open rewrites its run-time data (zeros, as PM holds them) before the
    /// program's store that matters; a declared run-time line too.
    const RUNTIME_TRACE: &str = "\
# persim-trace pm-size=0x1000
hypercall start
hypercall volatile 0x100 0x40
hypercall checkpoint 1
write 0x40 00 @ pc=0x402000
write 0x48 0000 @ pc=0x402000
write 0x80 00 @ pc=0x402000
write 0x100 07 @ pc=0x403000
write 0xc0 05 @ pc=0x401000
hypercall checkpoint 2
hypercall success
";

    fn summary(found: &[Culprit]) -> Vec<(&str, &str, usize, Relevance)> {
        found
            .iter()
            .map(|c| (c.what.as_str(), c.site.as_str(), c.stores, c.relevance))
            .collect()
    }

    #[test]
    fn stores_that_change_bytes_come_before_rewrites_and_run_time_data() {
        let mut c = verdict(
            vec![state("c1s0", &[2, 8]), state("c1s1", &[8])],
            &["c1s0", "c1s1"],
        );
        let open = || Reader::new(std::io::Cursor::new(RUNTIME_TRACE));
        let empty = BTreeMap::new();
        let config = Config::new(0x1000);
        find_culprits(
            open,
            config,
            None,
            std::slice::from_mut(&mut c),
            None,
            &empty,
        )
        .unwrap();
        let not_flushed = "not flushed at checkpoint 2";
        let runtime = "not flushed at checkpoint 2, declared run-time data";
        assert_eq!(
            summary(&c.culprits),
            [
                (not_flushed, "0x401000", 1, Relevance::Changes),
                (not_flushed, "0x402000", 3, Relevance::Rewrites),
                (runtime, "0x403000", 1, Relevance::RuntimeData),
            ]
        );
        // report.txt keeps that order within the kind, though the rewrites are more.
        let text = report_with(c).to_text();
        let guilty = text.find("1 by 0x401000").expect(&text);
        let rewrites = text.find("3 by 0x402000").expect(&text);
        assert!(guilty < rewrites, "{text}");
        assert!(
            text.contains(&format!("code: {runtime}: 1 store(s)")),
            "{text}"
        );
    }

    #[test]
    fn a_store_of_what_the_initial_image_held_is_a_rewrite() {
        // The initial image holds 05 at 0xc0: the program's store changes nothing there,
        // while the zeros the library writes over its 0x11 bytes now change them.
        let dir = tempfile::tempdir().unwrap();
        let initial = dir.path().join("initial");
        let mut pm = vec![0x11u8; 0x1000];
        pm[0xc0] = 5;
        std::fs::write(&initial, &pm).unwrap();
        let mut c = verdict(
            vec![state("c1s0", &[2, 8]), state("c1s1", &[8])],
            &["c1s0", "c1s1"],
        );
        let open = || Reader::new(std::io::Cursor::new(RUNTIME_TRACE));
        let empty = BTreeMap::new();
        let config = Config::new(0x1000);
        let slice = std::slice::from_mut(&mut c);
        find_culprits(open, config, Some(&initial), slice, None, &empty).unwrap();
        let ranks: Vec<(&str, Relevance)> = c
            .culprits
            .iter()
            .map(|c| (c.site.as_str(), c.relevance))
            .collect();
        assert_eq!(
            ranks,
            [
                ("0x402000", Relevance::Changes),
                ("0x401000", Relevance::Rewrites),
                ("0x403000", Relevance::RuntimeData),
            ]
        );
    }

    fn report_with(c: CheckpointVerdict) -> crate::Report {
        crate::Report {
            test: "t".into(),
            fs: "ext4".into(),
            cache: Default::default(),
            strategy: Default::default(),
            checkpoints: vec![c],
            nt_prefixes: None,
            runtime_data: None,
            outside_program: None,
            journal_protected: None,
            journal_violations: Vec::new(),
            traced_nothing: false,
            timings: Default::default(),
        }
    }

    #[test]
    fn a_final_state_that_arose_earlier_names_the_stores_before_it_too() {
        // c1s1 is final and first arose at the fence (entry 6): both kinds of culprits.
        let c = verdict(
            vec![
                state("c1s0", &[1, 9]),
                state("c1s1", &[6, 9]),
                state("c1s2", &[9]),
            ],
            &["c1s0", "c1s1", "c1s2"],
        );
        let found = culprits(c, None);
        let kinds: BTreeSet<&str> = found.iter().map(|c| c.what.as_str()).collect();
        assert_eq!(
            kinds,
            BTreeSet::from([
                "last stores before failure point 6 (state c1s1)",
                "not flushed at checkpoint 2",
                "flushed, not fenced at checkpoint 2",
            ]),
            "{found:#?}"
        );
        let first_cause = found
            .iter()
            .find(|c| c.what.starts_with("last stores"))
            .unwrap();
        assert_eq!(first_cause.entries, [4]);
        // c1s2 arises only at the checkpoint: the checkpoint's culprits explain it.
        assert!(!found.iter().any(|c| c.what.contains("c1s2")), "{found:#?}");
    }

    #[test]
    fn atomic_intervals_have_no_culprits() {
        let mut c = verdict(vec![state("c1s0", &[1]), state("c1s1", &[10])], &["c1s1"]);
        c.atomic = true;
        assert!(culprits(c, None).is_empty());
    }
}
