//! Committer slots: a counting semaphore limits how many appends write at once, and a
//! bitmap claimed with compare-and-swap tells each writer which slot (and so which chunk)
//! is its own. Limiting concurrent writers is what keeps PM out of overload (Optane's
//! bandwidth collapses with many concurrent writers).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// Most committers a ring buffer can have: one bit each in a `u64`.
pub const MAX_COMMITTERS: usize = 64;

pub struct Committers<T> {
    permits: Mutex<usize>,
    permit_freed: Condvar,
    claimed: AtomicU64,
    slots: Box<[UnsafeCell<T>]>,
}

// SAFETY: a slot is only reached through a `Committer`, which holds the slot's bit in
// `claimed`; bits are claimed with compare-and-swap, so at most one thread has a slot.
unsafe impl<T: Send> Sync for Committers<T> {}

/// A claimed slot; gives it back when dropped.
pub struct Committer<'a, T> {
    committers: &'a Committers<T>,
    index: usize,
}

impl<T> Committers<T> {
    /// One committer per slot.
    ///
    /// # Panics
    ///
    /// If `slots.len()` is not in `1..=MAX_COMMITTERS`.
    pub fn new(slots: Vec<T>) -> Self {
        assert!((1..=MAX_COMMITTERS).contains(&slots.len()));
        Committers {
            permits: Mutex::new(slots.len()),
            permit_freed: Condvar::new(),
            claimed: AtomicU64::new(0),
            slots: slots.into_iter().map(UnsafeCell::new).collect(),
        }
    }

    /// Waits for a free slot and claims it.
    pub fn acquire(&self) -> Committer<'_, T> {
        let mut permits = self.permits.lock().unwrap_or_else(PoisonError::into_inner);
        while *permits == 0 {
            permits = self
                .permit_freed
                .wait(permits)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *permits -= 1;
        drop(permits);
        // The permit guarantees a clear bit among the first `slots.len()`.
        let mut claimed = self.claimed.load(Ordering::Relaxed);
        loop {
            let index = (!claimed).trailing_zeros() as usize;
            debug_assert!(index < self.slots.len());
            match self.claimed.compare_exchange_weak(
                claimed,
                claimed | 1 << index,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Committer {
                        committers: self,
                        index,
                    }
                }
                Err(now) => claimed = now,
            }
        }
    }
}

impl<T> Committer<'_, T> {
    pub fn slot(&mut self) -> &mut T {
        // SAFETY: this committer holds the slot's bit (see `Sync` above), and `&mut self`
        // makes the borrow unique.
        unsafe { &mut *self.committers.slots[self.index].get() }
    }
}

impl<T> Drop for Committer<'_, T> {
    fn drop(&mut self) {
        // Release: the next claimer of this slot sees what this one wrote to it.
        self.committers
            .claimed
            .fetch_and(!(1 << self.index), Ordering::Release);
        *self
            .committers
            .permits
            .lock()
            .unwrap_or_else(PoisonError::into_inner) += 1;
        self.committers.permit_freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn no_more_than_the_slot_count_hold_a_slot_and_each_slot_has_one_holder() {
        let committers = Committers::new(vec![0u64; 3]);
        let holding = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    for _ in 0..500 {
                        let mut committer = committers.acquire();
                        let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        // A non-atomic read-modify-write: lost updates would show a race.
                        let slot = committer.slot();
                        let before = *slot;
                        std::hint::spin_loop();
                        *slot = before + 1;
                        holding.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        let mut committers = committers;
        assert_eq!(
            committers
                .slots
                .iter_mut()
                .map(|n| *n.get_mut())
                .sum::<u64>(),
            6 * 500
        );
        assert!(most.load(Ordering::SeqCst) <= 3);
    }
}
