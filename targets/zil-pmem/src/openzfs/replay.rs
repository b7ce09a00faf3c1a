//! What the kernel's replay of one dataset applies (patches 0002 and 0003: `zil_pmem_walk`,
//! `zil_pmem_replay_check`), predicted from the scanned region.

use super::{PmEntry, PoolLog, Slot};
use crate::layout::Position;

/// One dataset's replay as the kernel would run it at the first import after the crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetReplay {
    pub objset: u64,
    /// Entries of this txg or later are the dataset's log (`zh_claim_txg`).
    pub claim_txg: u64,
    /// The entries replay applies, in order, when the log is not kept.
    pub replayed: Vec<Position>,
    /// The dataset's entries replay leaves out, in order.
    pub lost: Vec<LostEntry>,
    /// Whether the log is kept and the dataset refused until the user abandons it: an
    /// entry is lost, or the pool's region has a corrupt header. Then nothing is replayed
    /// before `zfs set org.persim:zil_abandon=<claim txg>`, and `replayed` after it.
    pub kept: bool,
}

/// An entry replay leaves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostEntry {
    pub position: Position,
    pub txg: u64,
    pub slot: Slot,
    pub reason: LostReason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostReason {
    /// Its dependency record counts entries of the previous generation that are missing.
    DependencyMissing,
    /// Its header or body fails its checksum.
    Checksum,
    /// It follows, in a later generation, an entry (of any dataset) that was left out.
    LaterGeneration,
}

impl LostReason {
    pub fn describe(self) -> &'static str {
        match self {
            LostReason::DependencyMissing => "entries it depends on are missing",
            LostReason::Checksum => "its checksum does not match",
            LostReason::LaterGeneration => "a later generation than a lost entry",
        }
    }
}

impl PoolLog {
    /// The replay of every dataset with a log, for a pool that last synced `synced_txg`
    /// (so its datasets claim from the next txg on).
    pub fn predict(&self, synced_txg: u64) -> Vec<DatasetReplay> {
        let claim_txg = synced_txg + 1;
        (self.datasets(claim_txg).into_iter())
            .map(|objset| self.predict_dataset(objset, claim_txg))
            .collect()
    }

    /// Walks every entry of `claim_txg` or later in (generation, id) order, as the kernel
    /// does for each dataset: an entry whose dependency is short or whose checksum fails
    /// breaks its generation, and every entry of a later one is left out too.
    pub fn predict_dataset(&self, objset: u64, claim_txg: u64) -> DatasetReplay {
        let mut replay = DatasetReplay {
            objset,
            claim_txg,
            replayed: Vec::new(),
            lost: Vec::new(),
            kept: !self.corrupt_headers.is_empty(),
        };
        let mut broken_gen = None;
        for (i, entry) in self.entries.iter().enumerate() {
            let header = &entry.header;
            if header.txg < claim_txg {
                continue;
            }
            let reason = if broken_gen.is_some_and(|gen| gen != header.position.gen) {
                Some(LostReason::LaterGeneration)
            } else if header.dep.last_gen != 0 && !self.dependency_intact(i, claim_txg) {
                Some(LostReason::DependencyMissing)
            } else if !entry.body_intact {
                Some(LostReason::Checksum)
            } else {
                None
            };
            if matches!(
                reason,
                Some(LostReason::DependencyMissing | LostReason::Checksum)
            ) {
                broken_gen = Some(header.position.gen);
            }
            if header.objset != objset {
                continue;
            }
            match reason {
                None => replay.replayed.push(header.position),
                Some(reason) => replay.lost.push(LostEntry {
                    position: header.position,
                    txg: header.txg,
                    slot: entry.slot,
                    reason,
                }),
            }
        }
        replay.kept |= !replay.lost.is_empty();
        replay
    }

    /// `zil_pmem_dep_intact`: the entries before index `end` of the previous generation
    /// number, per txg of `claim_txg` or later, what the dependency record counts.
    fn dependency_intact(&self, end: usize, claim_txg: u64) -> bool {
        let dep = &self.entries[end].header.dep;
        let previous = || {
            self.entries[..end]
                .iter()
                .rev()
                .map(|e: &PmEntry| &e.header)
                .take_while(|h| h.position.gen >= dep.last_gen)
                .filter(|h| h.position.gen == dep.last_gen)
        };
        (dep.counts.iter())
            .filter(|&&(txg, count)| count != 0 && txg >= claim_txg)
            .all(|&(txg, count)| previous().filter(|h| h.txg == txg).count() as u64 == count)
    }
}
