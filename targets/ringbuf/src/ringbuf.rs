//! The ring buffer: formatting and opening a region, the append path, and releasing chunks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::access::PmAccess;
use crate::committers::{Committers, MAX_COMMITTERS};
use crate::error::{AppendError, OpenError};
use crate::layout::{
    chunk_offset, entry_len, Geometry, Header, SuperblockSlot, HEADER_LEN, HEADER_SPACE,
    MAX_CHUNK_SIZE, SUPERBLOCK_SPACE,
};
use crate::recover::{ChunkCursor, Recovery};
use crate::region::Region;

const ZERO_HEADER: [u8; HEADER_LEN] = [0; HEADER_LEN];

/// A crash-consistent, checksummed log of entries in a PM region.
///
/// The region is divided into equal chunks. Each committer (at most `committers` appends
/// write at once) fills a chunk of its own; a full chunk goes back to the free list when
/// [`RingBuf::release`] is asked to drop all of its entries. `ALIGN` (a power of two from
/// 64 to 4096) is where every entry header starts; 256 matches Optane's internal write
/// unit.
///
/// `R` is where the log lives and `A` how it reaches PM; both are fixed at compile time so
/// that the append path has no dynamic dispatch. See [`crate::dispatch`] for choosing `A`
/// by CPU features at run time.
pub struct RingBuf<R: Region, A: PmAccess, const ALIGN: usize = 256> {
    region: R,
    access: A,
    geometry: Geometry,
    next_id: AtomicU64,
    committers: Committers<Slot>,
    chunks: Mutex<ChunkLists>,
}

/// The chunk a committer appends to.
#[derive(Default)]
struct Slot {
    chunk: Option<usize>,
    /// Where the next entry goes in the chunk.
    pos: usize,
    last_id: u64,
}

#[derive(Debug)]
struct ChunkLists {
    /// Chunks whose first header is zero, taken from the end.
    free: Vec<usize>,
    /// Chunks no committer appends to any more.
    full: Vec<FullChunk>,
}

#[derive(Clone, Copy, Debug)]
struct FullChunk {
    index: usize,
    /// The highest id in the chunk.
    last_id: u64,
}

impl<R: Region, A: PmAccess, const ALIGN: usize> RingBuf<R, A, ALIGN> {
    /// Rejects unsupported alignments when the type is used, at compile time.
    const VALID_ALIGN: () = assert!(
        ALIGN.is_power_of_two() && ALIGN >= HEADER_SPACE && ALIGN <= SUPERBLOCK_SPACE,
        "ALIGN must be a power of two from 64 to 4096"
    );

    /// Formats `region` as an empty log of `chunk_size`-byte chunks (as many as fit) and
    /// opens it with `committers` concurrent writers.
    ///
    /// Formatting writes the superblock and each chunk's first header, not the whole region,
    /// and is crash-safe: until it completes, the region does not open.
    ///
    /// ```
    /// use persim_ringbuf::{Eadr, HeapRegion, RingBuf};
    ///
    /// let log = RingBuf::<_, _>::format(HeapRegion::new(1 << 20), Eadr, 64 << 10, 4)?;
    /// assert_eq!(log.geometry().chunk_count, 15);
    /// assert_eq!(log.max_body_len(), (64 << 10) - 64);
    /// # Ok::<(), persim_ringbuf::OpenError>(())
    /// ```
    pub fn format(
        region: R,
        access: A,
        chunk_size: usize,
        committers: usize,
    ) -> Result<Self, OpenError> {
        Self::check_setup(&region, committers)?;
        if !Self::valid_chunk_size(chunk_size) {
            return Err(OpenError::BadChunkSize {
                chunk_size,
                align: ALIGN,
            });
        }
        let chunk_count = region.len().saturating_sub(SUPERBLOCK_SPACE) / chunk_size;
        if chunk_count == 0 {
            return Err(OpenError::RegionTooSmall {
                len: region.len(),
                chunk_size,
            });
        }
        let geometry = Geometry {
            align: ALIGN,
            chunk_size,
            chunk_count,
        };
        let base = region.base();
        // SAFETY: every offset below is inside the region, checked above, and line-aligned;
        // the region is ours alone.
        unsafe {
            // Invalidate an old superblock first, so that a crash before the end never
            // leaves a valid superblock over partly reset chunks.
            access.store(base, 0, &[0; Geometry::ENCODED_LEN]);
            access.fence();
            for index in 0..chunk_count {
                access.store(base, chunk_offset(index, chunk_size), &ZERO_HEADER);
            }
            access.fence();
            access.store(base, 0, &geometry.encode());
            access.fence();
        }
        let free = (0..chunk_count).rev().collect();
        Ok(Self::assemble(
            region,
            access,
            geometry,
            committers,
            free,
            Vec::new(),
            1,
        ))
    }

    /// Opens a formatted region, reading the chunk geometry from its superblock and
    /// finding which chunks hold entries. Chunks that hold entries are not appended to
    /// again; they return to use once released.
    ///
    /// ```
    /// use persim_ringbuf::{Eadr, HeapRegion, RingBuf};
    ///
    /// let log = RingBuf::<_, _>::format(HeapRegion::new(1 << 20), Eadr, 64 << 10, 1)?;
    /// log.append(b"first")?;
    /// let (region, access) = log.into_parts();
    ///
    /// let log = RingBuf::<_, _>::open(region, access, 1)?;
    /// assert_eq!(log.append(b"second")?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(region: R, access: A, committers: usize) -> Result<Self, OpenError> {
        Self::check_setup(&region, committers)?;
        // SAFETY: the region is ours alone until this function returns.
        let bytes = unsafe { region_bytes(&region) };
        let superblock = bytes
            .get(..Geometry::ENCODED_LEN)
            .ok_or(OpenError::NotFormatted)?;
        let geometry = match Geometry::decode(superblock.try_into().expect("sliced to length")) {
            SuperblockSlot::NoMagic => return Err(OpenError::NotFormatted),
            SuperblockSlot::BadChecksum => return Err(OpenError::CorruptSuperblock),
            SuperblockSlot::BadVersion(version) => {
                return Err(OpenError::UnsupportedVersion(version))
            }
            SuperblockSlot::Valid(geometry) => geometry,
        };
        if geometry.align != ALIGN {
            return Err(OpenError::AlignmentMismatch {
                stored: geometry.align,
                expected: ALIGN,
            });
        }
        let Geometry {
            chunk_size,
            chunk_count,
            ..
        } = geometry;
        // A checksummed superblock with a bad geometry was not written by `format`.
        if !Self::valid_chunk_size(chunk_size) {
            return Err(OpenError::CorruptSuperblock);
        }
        let end = chunk_size
            .checked_mul(chunk_count)
            .and_then(|n| n.checked_add(SUPERBLOCK_SPACE));
        if chunk_count == 0 || end.is_none_or(|end| end > bytes.len()) {
            return Err(OpenError::GeometryExceedsRegion {
                chunk_size,
                chunk_count,
                len: bytes.len(),
            });
        }
        let mut free = Vec::new();
        let mut full = Vec::new();
        for index in (0..chunk_count).rev() {
            let start = chunk_offset(index, chunk_size);
            let chunk = &bytes[start..start + chunk_size];
            // A chunk that holds only a damaged header counts as used too: recovery reports
            // it, and appends must not overwrite it first.
            match ChunkCursor::new(chunk, ALIGN)
                .map(|found| found.header.map_or(found.after, |header| header.id))
                .max()
            {
                Some(last_id) => full.push(FullChunk { index, last_id }),
                None => free.push(index),
            }
        }
        // A free chunk may start with a torn header (of a release or an append cut
        // short): zeroed durably before any append, whose own header, torn over it by
        // another crash, would mix with it into one that recovery calls damaged.
        let torn: Vec<usize> = (free.iter())
            .map(|&index| chunk_offset(index, chunk_size))
            .filter(|&start| bytes[start..start + HEADER_LEN] != ZERO_HEADER)
            .collect();
        if !torn.is_empty() {
            let base = region.base();
            for &start in &torn {
                // SAFETY: the region is ours alone, and the header lies inside it.
                unsafe { access.store(base, start, &ZERO_HEADER) };
            }
            access.fence();
        }
        let next_id = full.iter().map(|chunk| chunk.last_id).max().unwrap_or(0) + 1;
        Ok(Self::assemble(
            region, access, geometry, committers, free, full, next_id,
        ))
    }

    fn valid_chunk_size(chunk_size: usize) -> bool {
        chunk_size != 0 && chunk_size.is_multiple_of(ALIGN) && chunk_size <= MAX_CHUNK_SIZE
    }

    fn check_setup(region: &R, committers: usize) -> Result<(), OpenError> {
        let () = Self::VALID_ALIGN;
        if !(1..=MAX_COMMITTERS).contains(&committers) {
            return Err(OpenError::BadCommitterCount { count: committers });
        }
        let addr = region.base() as usize;
        if !addr.is_multiple_of(ALIGN) {
            return Err(OpenError::MisalignedRegion { addr, align: ALIGN });
        }
        Ok(())
    }

    fn assemble(
        region: R,
        access: A,
        geometry: Geometry,
        committers: usize,
        free: Vec<usize>,
        full: Vec<FullChunk>,
        next_id: u64,
    ) -> Self {
        RingBuf {
            region,
            access,
            geometry,
            next_id: AtomicU64::new(next_id),
            committers: Committers::new((0..committers).map(|_| Slot::default()).collect()),
            chunks: Mutex::new(ChunkLists { free, full }),
        }
    }

    /// Appends `body` as one entry and returns its id once the entry is durable.
    /// Ids are unique and ascend in the order appends take their committer.
    ///
    /// ```
    /// use persim_ringbuf::{AppendError, Eadr, HeapRegion, RingBuf};
    ///
    /// let log = RingBuf::<_, _, 64>::format(HeapRegion::new(8192), Eadr, 4096, 1)?;
    /// assert_eq!(log.append(b"one")?, 1);
    /// assert_eq!(log.append(b"two")?, 2);
    /// assert_eq!(log.append(&[0; 5000]), Err(AppendError::TooLarge { len: 5000, max: 4032 }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append(&self, body: &[u8]) -> Result<u64, AppendError> {
        let max = self.max_body_len();
        if body.len() > max {
            return Err(AppendError::TooLarge {
                len: body.len(),
                max,
            });
        }
        let len = entry_len(body.len(), ALIGN);
        let body_crc = crc32c::crc32c(body);
        let mut committer = self.committers.acquire();
        let slot = committer.slot();
        let chunk = match slot.chunk {
            Some(chunk) if slot.pos + len <= self.geometry.chunk_size => chunk,
            _ => self.take_free_chunk(slot)?,
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let header = Header {
            id,
            body_len: body.len() as u32,
            body_crc,
        }
        .encode();
        self.access.append_boundary();
        self.write_entry(
            chunk_offset(chunk, self.geometry.chunk_size),
            slot.pos,
            len,
            body,
            &header,
        );
        self.access.append_boundary();
        slot.pos += len;
        slot.last_id = id;
        if slot.pos == self.geometry.chunk_size {
            // Full: let `release` have it now rather than at the next append.
            self.retire(slot);
        }
        Ok(id)
    }

    /// The write path: (1) zero the next header, (2) write the body, fence, (3) write the
    /// header, fence. A crash at any point leaves either no entry (the header slot is zero
    /// or torn) or the whole entry, and never a stale entry after it.
    #[inline(always)]
    fn write_entry(&self, chunk_start: usize, pos: usize, len: usize, body: &[u8], header: &[u8]) {
        let base = self.region.base();
        let at = chunk_start + pos;
        // SAFETY: the committer owns the chunk from `pos` on; the entry (`len` bytes from
        // `at`) and the next header line lie inside it, and all offsets are line-aligned.
        unsafe {
            if !cfg!(feature = "mutant-no-zero-next-header") && pos + len < self.geometry.chunk_size
            {
                self.access.store(base, at + len, &ZERO_HEADER);
            }
            self.access.store(base, at + HEADER_SPACE, body);
            if !cfg!(feature = "mutant-no-first-fence") {
                self.access.fence();
            }
            self.access.store(base, at, header);
            if !cfg!(feature = "mutant-no-second-fence") {
                self.access.fence();
            }
        }
    }

    /// Moves the slot's chunk to the full list.
    fn retire(&self, slot: &mut Slot) {
        if let Some(index) = slot.chunk.take() {
            self.lock_chunks().full.push(FullChunk {
                index,
                last_id: slot.last_id,
            });
        }
    }

    /// Retires the slot's chunk and gives the slot a free one.
    fn take_free_chunk(&self, slot: &mut Slot) -> Result<usize, AppendError> {
        let mut lists = self.lock_chunks();
        if let Some(index) = slot.chunk.take() {
            lists.full.push(FullChunk {
                index,
                last_id: slot.last_id,
            });
        }
        let index = lists.free.pop().ok_or(AppendError::LogFull {
            chunk_count: self.geometry.chunk_count,
        })?;
        slot.chunk = Some(index);
        slot.pos = 0;
        Ok(index)
    }

    /// Releases every chunk that no committer appends to and whose entries all have ids
    /// below `up_to`, by zeroing its first header (its checksum word, a fence, the rest, a
    /// fence); returns how many were released. Their entries are gone once this returns;
    /// entries in chunks still being filled stay until those chunks are full.
    ///
    /// ```
    /// use persim_ringbuf::{Eadr, HeapRegion, RingBuf};
    ///
    /// // Two chunks that hold one 4000-byte entry each.
    /// let mut log = RingBuf::<_, _, 64>::format(HeapRegion::new(4096 * 3), Eadr, 4096, 1)?;
    /// let body = [7; 4000];
    /// log.append(&body)?;
    /// log.append(&body)?;
    /// assert!(log.append(&body).is_err(), "both chunks are full");
    /// assert_eq!(log.release(2), 1, "the chunk holding entry 1");
    /// assert_eq!(log.append(&body)?, 3);
    /// assert_eq!(log.recover().map(|e| e.unwrap().id).collect::<Vec<_>>(), [2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&self, up_to: u64) -> usize {
        let mut lists = self.lock_chunks();
        let mut released = Vec::new();
        lists.full.retain(|chunk| {
            let done = chunk.last_id < up_to;
            if done {
                released.push(chunk.index);
            }
            !done
        });
        if released.is_empty() {
            return 0;
        }
        let base = self.region.base();
        let first_header = |index| chunk_offset(index, self.geometry.chunk_size);
        // Two steps: the checksum word first, so that a release cut short never leaves what
        // a flipped bit in the id of a chunk's first entry leaves (an id word zero, the
        // checksum word not), and recovery can call that damage.
        for &index in &released {
            // SAFETY: a full chunk belongs to no committer, and the list lock is held; the
            // header lies inside the region.
            unsafe {
                let header = base
                    .add(first_header(index))
                    .cast::<[u8; HEADER_LEN]>()
                    .read();
                self.access.store(
                    base,
                    first_header(index),
                    &Header::without_checksum(&header),
                );
            }
        }
        self.access.fence();
        for &index in &released {
            // SAFETY: as above.
            unsafe { self.access.store(base, first_header(index), &ZERO_HEADER) };
        }
        self.access.fence();
        lists.free.extend_from_slice(&released);
        released.len()
    }

    /// Every entry in the log, in ascending id order; a damaged entry is an error item and
    /// the rest still follow. Exclusive access keeps appends out while it reads.
    ///
    /// ```
    /// use persim_ringbuf::{Eadr, HeapRegion, RingBuf};
    ///
    /// let mut log = RingBuf::<_, _>::format(HeapRegion::new(1 << 20), Eadr, 64 << 10, 2)?;
    /// log.append(b"a")?;
    /// log.append(b"bc")?;
    /// let bodies: Vec<Vec<u8>> = log.recover().map(|e| Ok(e?.body.to_vec())).collect::<Result<_, persim_ringbuf::CorruptEntry>>()?;
    /// assert_eq!(bodies, [b"a".to_vec(), b"bc".to_vec()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recover(&mut self) -> Recovery<'_> {
        // SAFETY: `&mut self` excludes appends and releases while the recovery lives.
        let bytes = unsafe { region_bytes(&self.region) };
        let Geometry {
            chunk_size,
            chunk_count,
            ..
        } = self.geometry;
        let chunks = (0..chunk_count)
            .map(|index| &bytes[chunk_offset(index, chunk_size)..][..chunk_size])
            .collect();
        Recovery::new(chunks, ALIGN)
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Largest body an entry can have.
    pub fn max_body_len(&self) -> usize {
        self.geometry.max_body_len()
    }

    pub fn access(&self) -> &A {
        &self.access
    }

    /// Gives back the region and the access, e.g. to reopen the log as after a restart.
    pub fn into_parts(self) -> (R, A) {
        (self.region, self.access)
    }

    fn lock_chunks(&self) -> MutexGuard<'_, ChunkLists> {
        // The lists are consistent between statements that can panic: keep using them.
        self.chunks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The region's bytes.
///
/// # Safety
///
/// Nothing may write to the region while the slice lives.
unsafe fn region_bytes<R: Region>(region: &R) -> &[u8] {
    // SAFETY: `Region` guarantees `len` valid bytes at `base`; the caller excludes writers.
    unsafe { std::slice::from_raw_parts(region.base(), region.len()) }
}
