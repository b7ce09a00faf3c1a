//! The log handle: formatting and opening a region, the write path, and freeing the chunks
//! of synced txgs.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use persim_ringbuf::{Committers, PmAccess, Region, MAX_COMMITTERS};

use crate::error::{AppendError, OpenError};
use crate::layout::{
    entry_len, Dependency, EntryHeader, Geometry, Position, SuperblockError, DEP_TXGS, HEADER_SIZE,
    SUPERBLOCK_SPACE,
};

/// Committers ZIL-PMEM uses by default: enough to fill PM's write bandwidth, few enough
/// not to overload it.
pub const DEFAULT_COMMITTERS: usize = 4;

pub(crate) const ZERO_HEADER: [u8; HEADER_SIZE] = [0; HEADER_SIZE];

/// A ZIL-PMEM log in a PM region: entries written by up to `committers` threads at once,
/// each into a chunk of its own, claimed and replayed after a crash in dependency order.
///
/// The life cycle: [`ZilPmem::open`] (or [`ZilPmem::format`]), then
/// [`ZilPmem::claim`] with the consumer's [`crate::LogHeader`] and [`ZilPmem::replay`],
/// then [`ZilPmem::append`] for each synchronous write and [`ZilPmem::txg_synced`] after
/// each txg the consumer commits.
pub struct ZilPmem<R: Region, A: PmAccess> {
    pub(crate) region: R,
    pub(crate) access: A,
    pub(crate) geometry: Geometry,
    committers: Committers<Slot>,
    pub(crate) chunks: Mutex<Chunks>,
    pub(crate) gens: Mutex<Generations>,
    gen_durable: Condvar,
    /// (pool GUID, log GUID) once replay finished: appends are allowed.
    pub(crate) ready: Option<(u64, u64)>,
    pub(crate) claimed: bool,
}

/// The chunk a committer writes to.
#[derive(Default)]
struct Slot {
    chunk: Option<usize>,
    pos: usize,
    max_txg: u64,
}

/// Chunks no committer writes to.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    /// First header zero: ready for a committer.
    pub free: Vec<usize>,
    /// Full or claimed chunks by the highest txg of their entries: freed when it syncs.
    pub full: BTreeMap<u64, Vec<usize>>,
}

/// Generation bookkeeping of the write path.
#[derive(Debug, Default)]
pub(crate) struct Generations {
    pub gen: u64,
    pub next_id: u64,
    /// Entries per txg of the current generation.
    pub counts: [(u64, u64); DEP_TXGS],
    /// The dependency record of the current generation's entries.
    pub dep: Dependency,
    /// Entries assigned but not durable yet, per generation.
    pub in_flight: BTreeMap<u64, usize>,
}

impl Generations {
    /// The position of a new entry of `txg`; a new generation when asked, and when the
    /// current one already counts entries of `DEP_TXGS` other txgs.
    fn assign(&mut self, txg: u64, new_gen: bool) -> (Position, Dependency) {
        let has_txg = self.counts.iter().any(|&(t, n)| n > 0 && t == txg);
        let has_room = self.counts.iter().any(|&(_, n)| n == 0);
        if new_gen || self.next_id == 0 || !(has_txg || has_room) {
            let any = self.counts.iter().any(|&(_, n)| n > 0);
            self.dep = if any {
                Dependency {
                    last_gen: self.gen,
                    counts: self.counts,
                }
            } else {
                Dependency::default()
            };
            self.gen += 1;
            self.next_id = 1;
            self.counts = [(0, 0); DEP_TXGS];
        }
        let slot = match self.counts.iter().position(|&(t, n)| n > 0 && t == txg) {
            Some(i) => i,
            None => self.counts.iter().position(|&(_, n)| n == 0).expect("room"),
        };
        self.counts[slot] = (txg, self.counts[slot].1 + 1);
        let position = Position {
            gen: self.gen,
            id: self.next_id,
        };
        self.next_id += 1;
        *self.in_flight.entry(self.gen).or_default() += 1;
        (position, self.dep)
    }
}

impl<R: Region, A: PmAccess> ZilPmem<R, A> {
    /// Formats `region` as an empty log of `chunk_size`-byte chunks (as many as fit).
    /// Crash-safe: until it completes, the region does not open.
    pub fn format(
        region: R,
        access: A,
        chunk_size: usize,
        committers: usize,
    ) -> Result<Self, OpenError> {
        if !chunk_size.is_multiple_of(HEADER_SIZE) || chunk_size < 2 * HEADER_SIZE {
            return Err(OpenError::BadChunkSize { chunk_size });
        }
        let chunk_count = region.len().saturating_sub(SUPERBLOCK_SPACE) / chunk_size;
        if chunk_count == 0 || !(region.base() as usize).is_multiple_of(64) {
            return Err(OpenError::RegionTooSmall {
                len: region.len(),
                addr: region.base() as usize,
                chunk_size,
            });
        }
        let geometry = Geometry {
            chunk_size,
            chunk_count,
        };
        // SAFETY: every offset is inside the region (checked above) and line-aligned; the
        // region is ours alone.
        unsafe {
            // The old superblock goes first, so a crash never leaves a valid superblock
            // over chunks that still hold another log's entries.
            access.store(region.base(), 0, &[0; 64]);
            access.fence();
            for index in 0..chunk_count {
                access.store(region.base(), geometry.chunk_offset(index), &ZERO_HEADER);
            }
            access.fence();
            access.store(region.base(), 0, &geometry.encode());
            access.fence();
        }
        Self::open(region, access, committers)
    }

    /// Opens a formatted region. Refuses a region of another format version or geometry.
    pub fn open(region: R, access: A, committers: usize) -> Result<Self, OpenError> {
        if !(1..=MAX_COMMITTERS).contains(&committers) {
            return Err(OpenError::BadCommitterCount { count: committers });
        }
        if region.len() < SUPERBLOCK_SPACE || !(region.base() as usize).is_multiple_of(64) {
            return Err(OpenError::NotFormatted);
        }
        // SAFETY: the region holds at least the superblock space and is ours alone.
        let superblock = unsafe { std::slice::from_raw_parts(region.base(), SUPERBLOCK_SPACE) };
        let geometry = Geometry::decode(superblock).map_err(|e| match e {
            SuperblockError::NotFormatted => OpenError::NotFormatted,
            SuperblockError::Corrupt => OpenError::CorruptSuperblock,
            SuperblockError::Version {
                version,
                header_size,
            } => OpenError::OtherVersion {
                version,
                header_size,
            },
        })?;
        let fits = geometry
            .chunk_count
            .checked_mul(geometry.chunk_size)
            .and_then(|n| n.checked_add(SUPERBLOCK_SPACE))
            .is_some_and(|end| end <= region.len());
        if !fits
            || geometry.chunk_count == 0
            || !geometry.chunk_size.is_multiple_of(HEADER_SIZE)
            || geometry.chunk_size < 2 * HEADER_SIZE
        {
            return Err(OpenError::OtherGeometry {
                chunk_size: geometry.chunk_size,
                chunk_count: geometry.chunk_count,
                len: region.len(),
            });
        }
        Ok(ZilPmem {
            region,
            access,
            geometry,
            committers: Committers::new((0..committers).map(|_| Slot::default()).collect()),
            chunks: Mutex::new(Chunks::default()),
            gens: Mutex::new(Generations::default()),
            gen_durable: Condvar::new(),
            ready: None,
            claimed: false,
        })
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    pub fn access(&self) -> &A {
        &self.access
    }

    /// The largest body one entry can carry.
    pub fn max_body_len(&self) -> usize {
        self.geometry.chunk_size - HEADER_SIZE
    }

    /// Chunks free for committers.
    pub fn free_chunks(&self) -> usize {
        lock(&self.chunks).free.len()
    }

    /// Gives the region back.
    pub fn into_region(self) -> R {
        self.region
    }

    /// Gives the region and its access back, to open the log again as a restart would.
    pub fn into_parts(self) -> (R, A) {
        (self.region, self.access)
    }

    /// Writes an entry of object set `objset` for `txg` and returns once it is durable and
    /// every entry of an earlier generation is durable too. With `new_gen`, the entry
    /// starts a generation: replay applies it after every entry written before it began;
    /// without, it joins the current generation, whose entries replay in any order.
    pub fn append(
        &self,
        objset: u64,
        txg: u64,
        body: &[u8],
        new_gen: bool,
    ) -> Result<Position, AppendError> {
        let (pool_guid, log_guid) = self.ready.ok_or(AppendError::NotReady)?;
        if objset == 0 || txg == 0 {
            return Err(AppendError::ZeroField);
        }
        let len = entry_len(body.len());
        let chunk_size = self.geometry.chunk_size;
        if len > chunk_size {
            return Err(AppendError::TooLarge {
                body_len: body.len(),
                chunk_size,
            });
        }
        let mut committer = self.committers.acquire();
        let slot = committer.slot();
        if slot.chunk.is_none() || slot.pos + len > chunk_size {
            let mut chunks = lock(&self.chunks);
            let next = chunks.free.pop().ok_or(AppendError::LogFull)?;
            if let Some(full) = slot.chunk.replace(next) {
                chunks.full.entry(slot.max_txg).or_default().push(full);
            }
            slot.pos = 0;
            slot.max_txg = 0;
        }
        self.access.append_boundary();
        let (position, dep) = lock(&self.gens).assign(txg, new_gen);
        let header = EntryHeader {
            objset,
            pool_guid,
            log_guid,
            txg,
            position,
            len: len as u64,
            body_len: body.len() as u32,
            body_crc: crc32c::crc32c(body),
            dep,
        };
        let chunk = slot.chunk.expect("a chunk was taken above");
        let at = self.geometry.chunk_offset(chunk) + slot.pos;
        let base = self.region.base();
        // SAFETY: `at .. at + len` (and the next header, if it is inside the chunk) lie in
        // this committer's chunk, which no one else writes; offsets are multiples of 256.
        unsafe {
            if !cfg!(feature = "mutant-no-zero-next-header") && slot.pos + len < chunk_size {
                self.access.store(base, at + len, &ZERO_HEADER);
            }
            self.access.store(base, at + HEADER_SIZE, body);
            if !cfg!(feature = "mutant-no-drain-between-body-and-header") {
                self.access.fence();
            }
            self.access.store(base, at, &header.encode());
            self.access.fence();
        }
        slot.pos += len;
        slot.max_txg = slot.max_txg.max(txg);
        drop(committer);
        self.wait_for_earlier_generations(position.gen);
        self.access.append_boundary();
        Ok(position)
    }

    /// Marks this entry durable and waits until no entry of an earlier generation is in
    /// flight, so that an acknowledged entry's dependencies are durable too.
    fn wait_for_earlier_generations(&self, gen: u64) {
        let mut gens = lock(&self.gens);
        let left = gens.in_flight.get_mut(&gen).expect("counted when assigned");
        *left -= 1;
        if *left == 0 {
            gens.in_flight.remove(&gen);
            self.gen_durable.notify_all();
        }
        while gens
            .in_flight
            .first_key_value()
            .is_some_and(|(&g, _)| g < gen)
        {
            gens = self
                .gen_durable
                .wait(gens)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The consumer committed `txg` durably: frees every full or claimed chunk whose
    /// entries are all of `txg` or earlier, zeroing its first header so that a restart
    /// finds it empty.
    pub fn txg_synced(&self, txg: u64) {
        self.access.append_boundary();
        let mut chunks = lock(&self.chunks);
        let later = chunks.full.split_off(&(txg + 1));
        let synced = std::mem::replace(&mut chunks.full, later);
        let freed: Vec<usize> = synced.into_values().flatten().collect();
        self.zero_first_headers(&freed);
        chunks.free.extend(freed);
        drop(chunks);
        self.access.append_boundary();
    }

    /// Zeroes the first header of each chunk, then drains.
    pub(crate) fn zero_first_headers(&self, chunks: &[usize]) {
        if chunks.is_empty() || cfg!(feature = "mutant-no-zero-freed-chunk") {
            return;
        }
        for &chunk in chunks {
            // SAFETY: a chunk's start is inside the region and 256-aligned; no committer
            // writes a chunk that is not its own.
            unsafe {
                self.access.store(
                    self.region.base(),
                    self.geometry.chunk_offset(chunk),
                    &ZERO_HEADER,
                )
            };
        }
        self.access.fence();
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded lists stay consistent across a panic elsewhere: keep using them.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
