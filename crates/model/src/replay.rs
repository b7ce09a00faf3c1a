//! Replaying a trace through the crash model: entries in, durable writes and failure
//! points out, through a [`Sink`].

use crate::block::{BlkPending, BLOCK};
use crate::config::{Config, Scope, Strategy};
use crate::jbd2::JournalViolation;
use crate::mechanism::Mechanism;
use crate::origin::{Choice, FailureKind, FailurePoint};
use crate::pending::{LineState, PmPending};
use crate::program_pm::ProgramPm;
use crate::runtime_data::RuntimeRanges;
use crate::strategy::{choose, CrashImage, CrashImages, Guided};
use persim_trace::{Entry, FenceKind, Hypercall, Op};
use rustc_hash::FxHashSet;
use std::hash::{Hash, Hasher};
use std::io;

/// Where replay results go: typically an image store that keeps the persisted image and
/// materialises crash images.
pub trait Sink {
    /// Bytes at `offset` of the image (PM, then the block device) became durable.
    fn persist(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()>;
    /// A failure point was reached; the view yields its crash images.
    fn failure_point(&mut self, view: &FailureView<'_>) -> io::Result<()>;
}

/// The model's state at a failure point.
pub struct FailureView<'a> {
    pub point: FailurePoint,
    config: &'a Config,
    lines: Vec<&'a LineState>,
    /// Per line: it holds only run-time data the program declared (`hypercall volatile`);
    /// empty when nothing was declared (no allocation per failure point).
    runtime: Vec<bool>,
    /// Per line: it lies outside the PM the program accessed (`Scope::Program`); empty
    /// when every line is in scope.
    outside: Vec<bool>,
    /// Per line: a journal or log whose rules hold so far protects it; empty when none does.
    protected: Vec<bool>,
    /// The journal or log rules broken since the previous failure point.
    pub journal_violations: Vec<JournalViolation>,
    blocks: Vec<(u64, &'a [Box<[u8]>])>,
    /// A pool's transaction groups say no recovery reads the pending block writes.
    blocks_unreachable: bool,
}

impl FailureView<'_> {
    /// The crash images the configured strategy chooses here (`reads` explores every
    /// dirty line, with NT prefixes).
    pub fn crash_images(&self) -> CrashImages {
        self.crash_images_guided(|_| true, true)
    }

    /// The crash images the configured strategy chooses here, where `reads` explores the
    /// dirty lines (by address) for which `explore` holds, and with `nt_prefixes` also
    /// every program-order prefix of their NT units; other strategies ignore both. Lines
    /// of only run-time data, and under `Scope::Program` lines outside the program's PM,
    /// are never explored by `reads` or `global-prefix`.
    pub fn crash_images_guided(
        &self,
        explore: impl Fn(u64) -> bool,
        nt_prefixes: bool,
    ) -> CrashImages {
        let seed = self.config.seed ^ self.point.index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let block_writes: Vec<u32> = self.blocks.iter().map(|(_, w)| w.len() as u32).collect();
        let explore: Vec<bool> = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| !self.follows(i) && explore(l.line))
            .collect();
        let nt_prefixes = self
            .lines
            .iter()
            .zip(&explore)
            .map(|(l, &e)| e && nt_prefixes && l.units().iter().any(|u| u.nt))
            .collect();
        let guided = Guided {
            explore,
            nt_prefixes,
            blocks_follow: self.blocks_unreachable,
        };
        choose(
            self.config,
            self.point.kind,
            seed,
            &self.lines,
            &guided,
            &block_writes,
        )
    }

    /// Whether `image` applies a pending NT unit (`reads` asks: a state only such images
    /// give depends on NT stores).
    pub fn applies_nt(&self, image: &CrashImage) -> bool {
        self.lines
            .iter()
            .zip(&image.line_prefixes)
            .any(|(line, &k)| line.units()[..k as usize].iter().any(|u| u.nt))
    }

    /// The fully persisted image: every pending unit and block write applied (the image
    /// whose recovery `reads` traces).
    pub fn fully_persisted(&self) -> CrashImage {
        CrashImage {
            choice: Choice::Everything,
            block: (!self.blocks.is_empty()).then_some(Choice::Everything),
            line_prefixes: self.lines.iter().map(|l| l.units().len() as u32).collect(),
            block_writes: self.blocks.iter().map(|(_, w)| w.len() as u32).collect(),
        }
    }

    /// Hands `write` every write that turns the persisted image into `image`.
    pub fn apply(&self, image: &CrashImage, mut write: impl FnMut(u64, &[u8])) {
        for (line, &k) in self.lines.iter().zip(&image.line_prefixes) {
            for unit in &line.units()[..k as usize] {
                write(unit.addr, unit.bytes());
            }
        }
        for ((offset, writes), &n) in self.blocks.iter().zip(&image.block_writes) {
            if n > 0 {
                write(self.config.pm_size + offset, &writes[n as usize - 1]);
            }
        }
    }

    pub fn config(&self) -> &Config {
        self.config
    }

    /// The lines with pending units, in address order.
    pub fn pending_lines(&self) -> &[&LineState] {
        &self.lines
    }

    /// The dirty lines (addresses, ascending) whose pending units all write run-time data
    /// the program declared: `reads` and `global-prefix` let them follow the cut.
    pub fn runtime_lines(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.lines.len())
            .filter(|&i| self.is_runtime(i))
            .map(|i| self.lines[i].line)
    }

    /// The dirty lines (addresses, ascending) outside the PM the program accessed, which
    /// `reads` and `global-prefix` let follow the cut under `Scope::Program`.
    pub fn outside_program_lines(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.lines.len())
            .filter(|&i| self.is_outside(i))
            .map(|i| self.lines[i].line)
    }

    /// Whether some dirty line may be explored: neither run-time data nor outside the
    /// program's PM nor protected, and not only rewriting what is durable (`durable`
    /// reads it); otherwise every line follows the cut, whatever recovery reads.
    pub fn has_explorable_lines(&self, mut durable: impl FnMut(u64, &mut [u8])) -> bool {
        (0..self.lines.len())
            .any(|i| !self.follows(i) && !self.lines[i].rewrites_durable(&mut durable))
    }

    /// Whether the dirty line at `line` only rewrites the durable bytes
    /// ([`LineState::rewrites_durable`]): it may follow the cut, with the same images.
    pub fn rewrites_durable(&self, line: u64, durable: impl FnMut(u64, &mut [u8])) -> bool {
        self.lines
            .binary_search_by_key(&line, |l| l.line)
            .is_ok_and(|i| self.lines[i].rewrites_durable(durable))
    }

    fn is_runtime(&self, line: usize) -> bool {
        self.runtime.get(line) == Some(&true)
    }

    /// The byte offsets of the pending block writes that no recovery reads (a pool's
    /// transaction groups say so), which `reads` and `global-prefix` leave lost under
    /// `Scope::Program`; empty when they may be read.
    pub fn unreachable_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks
            .iter()
            .filter(|_| self.blocks_unreachable)
            .map(|(offset, _)| *offset)
    }

    /// The dirty lines (addresses, ascending) a journal or log protects, which `reads` and
    /// `global-prefix` let follow the cut under `Scope::Program`.
    pub fn protected_lines(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.lines.len())
            .filter(|&i| self.protected.get(i) == Some(&true))
            .map(|i| self.lines[i].line)
    }

    fn is_outside(&self, line: usize) -> bool {
        self.outside.get(line) == Some(&true)
    }

    /// Never explored: run-time data, outside the program's PM, or protected by a journal.
    fn follows(&self, line: usize) -> bool {
        self.is_runtime(line) || self.is_outside(line) || self.protected.get(line) == Some(&true)
    }
}

/// The trace cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// An access falls outside the PM region or the block device.
    #[error(
        "entry {index}: {len}-byte access at {offset:#x} is outside the {what} \
         ({size:#x} bytes); give the right size (--pm-size / --blk-size or the trace header)"
    )]
    OutOfRange {
        index: u64,
        what: &'static str,
        offset: u64,
        len: u64,
        size: u64,
    },
    /// A block write whose offset or length is not a multiple of 512.
    #[error(
        "entry {index}: block write of {len} bytes at {offset:#x} is not a whole \
         number of 512-byte blocks"
    )]
    Unaligned { index: u64, offset: u64, len: u64 },
    /// The sink failed (e.g. writing an image); its I/O error is the source, so callers
    /// can tell e.g. a closed output pipe.
    #[error("handing on a failure point failed")]
    Sink(#[from] io::Error),
}

/// Replays entries one at a time; memory is bounded by the pending state.
pub struct Replay {
    config: Config,
    pm: PmPending,
    blk: BlkPending,
    index: u64,
    checkpoint: Option<u64>,
    /// PM the program declared run-time data so far.
    runtime: RuntimeRanges,
    /// PM the program accessed from user space so far (`Scope::Program`).
    program: ProgramPm,
    /// The file system's jbd2 journal or XFS log and a libpmemobj pool's logs
    /// (`Scope::Program` with their layouts).
    mechanisms: Vec<Mechanism>,
    /// `fast`: hashes of the code locations of the failure points so far.
    seen_locations: FxHashSet<u64>,
}

impl Replay {
    pub fn new(config: Config) -> Replay {
        let mechanisms = match config.scope {
            Scope::Program => Mechanism::of(&config),
            Scope::All => Vec::new(),
        };
        Replay {
            config,
            pm: PmPending::default(),
            blk: BlkPending::default(),
            index: 0,
            checkpoint: None,
            runtime: RuntimeRanges::default(),
            program: ProgramPm::default(),
            mechanisms,
            seen_locations: FxHashSet::default(),
        }
    }

    pub fn step(&mut self, entry: &Entry, sink: &mut impl Sink) -> Result<(), ModelError> {
        let mode = self.config.cache;
        if self.config.scope == Scope::Program {
            self.program.note(entry);
        }
        match &entry.op {
            Op::Write { addr, data, nt } => {
                self.check_pm(*addr, data.len() as u64)?;
                for mechanism in &mut self.mechanisms {
                    mechanism.store(*addr, data, self.index, &self.pm);
                }
                self.pm.store(mode, *addr, data, *nt, self.index);
            }
            Op::Flush { addr, .. } => {
                self.check_pm(*addr, 1)?;
                let at_flushes = matches!(
                    self.config.strategy,
                    Strategy::ProgramOrder | Strategy::Fast
                );
                if at_flushes && self.new_location(entry) {
                    self.failure_point(FailureKind::Flush, sink)?;
                }
                self.pm.flush(mode, *addr);
            }
            // Where an interrupt lands is no choice of the program: the replay is that of the
            // same execution without it (docs/design/model.md, "Interrupts").
            Op::Fence(FenceKind::Interrupt) => {}
            Op::Fence(_) => {
                if self.new_location(entry) {
                    self.failure_point(FailureKind::Fence, sink)?;
                }
                let mut result = Ok(());
                self.pm.fence(mode, |unit| {
                    if result.is_ok() {
                        result = sink.persist(unit.addr, unit.bytes());
                    }
                });
                result?;
                for mechanism in &mut self.mechanisms {
                    mechanism.fenced(&self.pm);
                }
            }
            Op::Hypercall(Hypercall::Checkpoint(n)) => {
                self.checkpoint = Some(*n);
                self.failure_point(FailureKind::Checkpoint, sink)?;
            }
            Op::BlkWrite { offset, data } => {
                let len = data.len() as u64;
                if !offset.is_multiple_of(BLOCK) || !len.is_multiple_of(BLOCK) {
                    return Err(ModelError::Unaligned {
                        index: self.index,
                        offset: *offset,
                        len,
                    });
                }
                self.check_range("block device", *offset, len, self.config.blk_size)?;
                for mechanism in &mut self.mechanisms {
                    mechanism.blk_write(*offset, data, self.index);
                }
                self.blk.write(*offset, data);
            }
            Op::BlkFlush => {
                self.failure_point(FailureKind::Blkflush, sink)?;
                let base = self.config.pm_size;
                let mut result = Ok(());
                self.blk.flush(|offset, bytes| {
                    if result.is_ok() {
                        result = sink.persist(base + offset, bytes);
                    }
                });
                result?;
                for mechanism in &mut self.mechanisms {
                    mechanism.blk_flushed();
                }
            }
            Op::Hypercall(Hypercall::Volatile { addr, len }) => {
                self.check_pm(*addr, *len)?;
                self.runtime.add(*addr, *len);
            }
            Op::Read { .. }
            | Op::BlkRead { .. }
            | Op::Hypercall(_)
            | Op::Call { .. }
            | Op::Return { .. } => {}
        }
        self.index += 1;
        Ok(())
    }

    /// Whether a failure point at `entry` is wanted: always, except under `fast` at a code
    /// location (pc and stack) already seen; an entry without one is always new.
    fn new_location(&mut self, entry: &Entry) -> bool {
        if self.config.strategy != Strategy::Fast || entry.meta.is_empty() {
            return true;
        }
        let mut hasher = rustc_hash::FxHasher::default();
        entry.meta.hash(&mut hasher);
        self.seen_locations.insert(hasher.finish())
    }

    /// The lines with pending units now (before the next entry), in address order.
    pub fn pending_lines(&self) -> Vec<&LineState> {
        self.pm.dirty_lines()
    }

    /// Ends the trace: the final failure point.
    pub fn finish(mut self, sink: &mut impl Sink) -> Result<(), ModelError> {
        self.failure_point(FailureKind::End, sink)
    }

    fn failure_point(&mut self, kind: FailureKind, sink: &mut impl Sink) -> Result<(), ModelError> {
        let lines = self.pm.dirty_lines();
        let runtime = match self.runtime.is_empty() {
            true => Vec::new(),
            false => lines.iter().map(|l| self.runtime.holds(l)).collect(),
        };
        let outside = match self.program.is_known() {
            true => lines.iter().map(|l| !self.program.holds(l)).collect(),
            false => Vec::new(),
        };
        let journal_violations = self
            .mechanisms
            .iter_mut()
            .flat_map(Mechanism::take_violations)
            .collect();
        let holding: Vec<&Mechanism> = self
            .mechanisms
            .iter()
            .filter(|m| m.holds_so_far())
            .collect();
        let protected = match holding.is_empty() {
            true => Vec::new(),
            false => lines
                .iter()
                .map(|l| holding.iter().any(|m| m.protects(l, &self.pm)))
                .collect(),
        };
        let view = FailureView {
            point: FailurePoint {
                index: self.index,
                kind,
                checkpoint: self.checkpoint,
            },
            config: &self.config,
            lines,
            runtime,
            outside,
            protected,
            journal_violations,
            blocks: self.blk.pending(),
            blocks_unreachable: self.mechanisms.iter().any(Mechanism::blocks_unreachable),
        };
        Ok(sink.failure_point(&view)?)
    }

    fn check_pm(&self, offset: u64, len: u64) -> Result<(), ModelError> {
        self.check_range("PM region", offset, len, self.config.pm_size)
    }

    fn check_range(
        &self,
        what: &'static str,
        offset: u64,
        len: u64,
        size: u64,
    ) -> Result<(), ModelError> {
        if offset.checked_add(len).is_some_and(|end| end <= size) {
            Ok(())
        } else {
            Err(ModelError::OutOfRange {
                index: self.index,
                what,
                offset,
                len,
                size,
            })
        }
    }
}
