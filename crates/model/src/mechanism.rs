//! The consistency mechanisms a replay follows under `Scope::Program`, as the initial
//! image's on-media format gives them: a block cache's (DPWC's log, dm-writecache), or
//! ZIL-PMEM's log, or the file system's jbd2 journal or XFS log; an OpenZFS pool's
//! transaction groups on the block device and its ZIL's blocks on PM; and a libpmemobj
//! pool's lane logs.

use crate::config::Config;
use crate::dpwc_log::DpwcLog;
use crate::jbd2::{Journal, JournalViolation};
use crate::pending::{LineState, PmPending};
use crate::pmemobj_log::PmemobjLogs;
use crate::writecache_log::WritecacheLog;
use crate::xfs_log::XfsLog;
use crate::zfs_pool::ZfsPool;
use crate::zil_blocks::ZilBlocks;
use crate::zil_pmem_log::ZilPmemLog;

#[derive(Debug)]
pub enum Mechanism {
    Jbd2(Journal),
    Xfs(XfsLog),
    Dpwc(DpwcLog),
    Writecache(WritecacheLog),
    ZilPmem(ZilPmemLog),
    Zfs(ZfsPool),
    ZilBlocks(ZilBlocks),
    Pmemobj(PmemobjLogs),
}

impl Mechanism {
    /// The mechanisms `config` names: a block cache's (DPWC's log, dm-writecache's
    /// metadata: their blocks may hold a file system's) or else the file system's (a jbd2
    /// journal first), then an OpenZFS pool's on the block device with its ZIL's blocks on
    /// PM, then the libpmemobj pool's.
    pub fn of(config: &Config) -> Vec<Mechanism> {
        let fs = if let Some(log) = &config.dpwc {
            Some(Mechanism::Dpwc(DpwcLog::new(log.clone())))
        } else if let Some(cache) = &config.writecache {
            Some(Mechanism::Writecache(WritecacheLog::new(cache.clone())))
        } else if let Some(log) = &config.zil_pmem {
            Some(Mechanism::ZilPmem(ZilPmemLog::new(log.clone())))
        } else if let Some(journal) = &config.journal {
            Some(Mechanism::Jbd2(Journal::new(journal.clone())))
        } else {
            config
                .xfs_log
                .clone()
                .map(|log| Mechanism::Xfs(XfsLog::new(log)))
        };
        let zfs = config.zfs.clone().into_iter().flat_map(|layout| {
            [
                Mechanism::Zfs(ZfsPool::new(layout)),
                Mechanism::ZilBlocks(ZilBlocks::default()),
            ]
        });
        let pool = config
            .pmemobj
            .clone()
            .map(|pool| Mechanism::Pmemobj(PmemobjLogs::new(pool)));
        fs.into_iter().chain(zfs).chain(pool).collect()
    }

    pub fn store(&mut self, addr: u64, data: &[u8], entry: u64, pending: &PmPending) {
        match self {
            Mechanism::Jbd2(j) => j.store(addr, data, entry, pending),
            Mechanism::Xfs(x) => x.store(addr, data, entry, pending),
            Mechanism::Dpwc(d) => d.store(addr, data, entry, pending),
            Mechanism::Writecache(w) => w.store(addr, data, entry, pending),
            Mechanism::ZilPmem(z) => z.store(addr, data, entry, pending),
            Mechanism::Pmemobj(p) => p.store(addr, data, entry, pending),
            Mechanism::ZilBlocks(z) => z.store(addr, data),
            // a pool on the block device: PM stores are not its
            Mechanism::Zfs(_) => {}
        }
    }

    /// A block write of `data` at byte `offset` of the block device by entry `entry`.
    pub fn blk_write(&mut self, offset: u64, data: &[u8], entry: u64) {
        if let Mechanism::Zfs(z) = self {
            z.blk_write(offset, data, entry);
        }
    }

    pub fn blk_flushed(&mut self) {
        if let Mechanism::Zfs(z) = self {
            z.blk_flushed();
        }
    }

    /// Whether no recovery reads the pending block writes (only a pool on the block
    /// device knows).
    pub fn blocks_unreachable(&self) -> bool {
        matches!(self, Mechanism::Zfs(z) if z.pending_unreachable())
    }

    pub fn fenced(&mut self, pending: &PmPending) {
        match self {
            Mechanism::Jbd2(j) => j.fenced(pending),
            Mechanism::Xfs(x) => x.fenced(pending),
            Mechanism::Dpwc(d) => d.fenced(pending),
            Mechanism::Writecache(w) => w.fenced(pending),
            Mechanism::ZilPmem(z) => z.fenced(pending),
            Mechanism::Zfs(_) => {}
            Mechanism::ZilBlocks(z) => z.fenced(|line| pending.is_dirty(line)),
            // the logs' durability is asked of the pending state when an in-place store
            // needs it
            Mechanism::Pmemobj(_) => {}
        }
    }

    pub fn holds_so_far(&self) -> bool {
        match self {
            Mechanism::Jbd2(j) => j.holds_so_far(),
            Mechanism::Xfs(x) => x.holds_so_far(),
            Mechanism::Dpwc(d) => d.holds_so_far(),
            Mechanism::Writecache(w) => w.holds_so_far(),
            Mechanism::ZilPmem(z) => z.holds_so_far(),
            Mechanism::Zfs(z) => z.holds_so_far(),
            // no rule: the checksum covers the whole block
            Mechanism::ZilBlocks(_) => true,
            Mechanism::Pmemobj(p) => p.holds_so_far(),
        }
    }

    pub fn take_violations(&mut self) -> Vec<JournalViolation> {
        match self {
            Mechanism::Jbd2(j) => j.take_violations(),
            Mechanism::Xfs(x) => x.take_violations(),
            Mechanism::Dpwc(d) => d.take_violations(),
            Mechanism::Writecache(w) => w.take_violations(),
            Mechanism::ZilPmem(z) => z.take_violations(),
            Mechanism::Zfs(z) => z.take_violations(),
            Mechanism::ZilBlocks(_) => Vec::new(),
            Mechanism::Pmemobj(p) => p.take_violations(),
        }
    }

    pub fn protects(&self, line: &LineState, pending: &PmPending) -> bool {
        match self {
            Mechanism::Jbd2(j) => j.protects(line.line),
            Mechanism::Xfs(x) => x.protects(line.line),
            Mechanism::Dpwc(d) => d.protects(line.line),
            Mechanism::Writecache(w) => w.protects(line.line),
            Mechanism::ZilPmem(z) => z.protects(line.line),
            Mechanism::Zfs(_) => false,
            Mechanism::ZilBlocks(z) => z.protects(line.line),
            Mechanism::Pmemobj(p) => p.protects(line, pending),
        }
    }
}
