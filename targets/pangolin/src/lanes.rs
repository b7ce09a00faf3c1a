//! Log lanes: each a redo log (two copies on PM) and a commit's working memory, held by
//! one committing thread at a time, as libpmemobj's lanes are. Threads commit at once on
//! different lanes; recovery replays every committed lane.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use crate::tx::Scratch;

pub struct Lane {
    pub index: usize,
    /// The sequence number of the lane's last commit.
    pub seq: u64,
    pub scratch: Scratch,
}

pub struct Lanes(Vec<Mutex<Lane>>);

impl Lanes {
    /// Lanes whose last commits had sequence numbers `seqs`.
    pub fn new(seqs: &[u64]) -> Self {
        Lanes(
            seqs.iter()
                .enumerate()
                .map(|(index, &seq)| {
                    Mutex::new(Lane {
                        index,
                        seq,
                        scratch: Scratch::default(),
                    })
                })
                .collect(),
        )
    }

    /// A free lane, the first one free from lane 0 (one thread keeps reusing lane 0's
    /// memory), or lane 0 once it is free.
    pub fn claim(&self) -> MutexGuard<'_, Lane> {
        for lane in &self.0 {
            match lane.try_lock() {
                Ok(guard) => return guard,
                Err(TryLockError::Poisoned(guard)) => return guard.into_inner(),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        self.0[0].lock().unwrap_or_else(PoisonError::into_inner)
    }
}
