//! The engine's format as OpenZFS with ZIL-PMEM's patches (targets/zil-pmem/openzfs) leaves
//! it on a pool's log vdev, read from an image: the region found and scanned as the
//! kernel's import scans it ([`PoolLog`]), each dataset's replay predicted as the kernel's
//! replay walks it ([`PoolLog::predict`]), and the txg the pool last synced, from the
//! uberblocks of its main vdev ([`last_synced_txg`]). Tests check what the kernel replayed
//! against these predictions; `zil-pmem-dump` prints them.
//!
//! The kernel's format is the engine's plus an end mark ([`end_mark`], format 2): each entry
//! writes one in the slot after it (instead of zeros) and a free chunk starts with one, so
//! the slot where a chunk's walk stops holds the end mark or a header torn with it. A slot
//! with a wrong checksum and no word of the end mark is damage.

mod replay;
mod uberblock;

pub use replay::{DatasetReplay, LostEntry, LostReason};
pub use uberblock::last_synced_txg;

use crate::layout::{
    EntryHeader, Geometry, FORMAT_VERSION as ENGINE_FORMAT, HEADER_FIELDS, HEADER_SIZE,
    SUPERBLOCK_SPACE,
};

/// The format version of the kernel's region (`ZIL_PMEM_VERSION`): the engine's with end marks.
pub const FORMAT_VERSION: u32 = 2;
/// Each of the end mark's 15 words of fields ("ZILPMEND"); its checksum field holds the low
/// half (`ZIL_PMEM_END_WORD`).
pub const END_WORD: u64 = u64::from_le_bytes(*b"ZILPMEND");

/// Bytes of a ZIL record's common header (`lr_t`) that every entry body starts with.
const LR_HEADER_LEN: usize = 32;
/// The case-insensitive flag OpenZFS ors into a record's type (`TX_CI`).
const TX_CI: u64 = 1 << 63;

/// The region a pool's log vdev holds, as its import would scan it.
#[derive(Clone, Debug)]
pub struct PoolLog {
    /// Where the region (its superblock) starts in the image.
    pub region_offset: usize,
    pub geometry: Geometry,
    /// The pool's and the log vdev's GUIDs, as the newest entry carries them: the kernel
    /// takes only entries of its own pool and log vdev.
    pub guids: Option<(u64, u64)>,
    /// Every valid entry, chunk by chunk, each up to its chunk's first invalid header.
    pub entries: Vec<PmEntry>,
    /// Header slots no crash leaves where a chunk's walk stops (reserved bytes written, or a
    /// wrong checksum and no word of the end mark): the kernel's "corrupt entry header or
    /// end mark" at load.
    pub corrupt_headers: Vec<Slot>,
}

/// An entry the scan found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmEntry {
    pub header: EntryHeader,
    pub slot: Slot,
    /// Whether the body matches its CRC32C and holds at least a record header.
    pub body_intact: bool,
    /// The ZIL record type of the body (`TX_WRITE` is 9), when the body is intact.
    pub txtype: Option<u64>,
}

/// Where a header lies: its chunk and its offset in the chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub chunk: usize,
    pub offset: usize,
}

/// Why an image holds no region.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FindError {
    #[error("no ZIL-PMEM superblock in the image (is it the PM of a pool with org.persim:zil=pmem, after its first mount?)")]
    NoSuperblock,
    #[error("the ZIL-PMEM superblock at offset {offset} describes {chunk_count} chunks of {chunk_size} bytes, more than the image holds")]
    Truncated {
        offset: usize,
        chunk_size: usize,
        chunk_count: usize,
    },
}

impl PoolLog {
    /// Finds the region's superblock at a 4 KiB boundary of `image` (the log vdev's PM as a
    /// whole device, its namespace info block included, or the vdev alone) and scans it.
    pub fn find(image: &[u8]) -> Result<Self, FindError> {
        let (region_offset, geometry) = (0..image.len().saturating_sub(SUPERBLOCK_SPACE - 1))
            .step_by(SUPERBLOCK_SPACE)
            .find_map(|at| {
                Geometry::decode_version(&image[at..], FORMAT_VERSION)
                    .ok()
                    .map(|g| (at, g))
            })
            .ok_or(FindError::NoSuperblock)?;
        let end = (geometry.chunk_count.checked_mul(geometry.chunk_size))
            .and_then(|n| n.checked_add(region_offset + SUPERBLOCK_SPACE));
        if geometry.chunk_size < 2 * HEADER_SIZE || end.is_none_or(|end| end > image.len()) {
            return Err(FindError::Truncated {
                offset: region_offset,
                chunk_size: geometry.chunk_size,
                chunk_count: geometry.chunk_count,
            });
        }
        let region = &image[region_offset..];
        let chunk = |c: usize| &region[geometry.chunk_offset(c)..][..geometry.chunk_size];
        let guids = (0..geometry.chunk_count)
            .filter_map(|c| EntryHeader::decode(chunk(c)))
            .max_by_key(|h| (h.txg, h.position))
            .map(|h| (h.pool_guid, h.log_guid));
        let mut log = PoolLog {
            region_offset,
            geometry,
            guids,
            entries: Vec::new(),
            corrupt_headers: Vec::new(),
        };
        for c in 0..geometry.chunk_count {
            log.scan_chunk(c, chunk(c));
        }
        log.entries.sort_by_key(|e| e.header.position);
        Ok(log)
    }

    /// The kernel's scan of one chunk (`zil_pmem_scan`): entries up to the first header
    /// that is not a valid one of this pool's log.
    fn scan_chunk(&mut self, chunk: usize, bytes: &[u8]) {
        let mut offset = 0;
        while offset + HEADER_SIZE <= bytes.len() {
            let slot = Slot { chunk, offset };
            let raw = &bytes[offset..][..HEADER_SIZE];
            let Some(header) = EntryHeader::decode(raw) else {
                if corrupt(raw) {
                    self.corrupt_headers.push(slot);
                }
                return;
            };
            let len = header.len as usize;
            let ours = self.guids == Some((header.pool_guid, header.log_guid));
            if !ours || header.body_len == 0 || header.body_crc == 0 || len > bytes.len() - offset {
                return;
            }
            let body = &bytes[offset + HEADER_SIZE..][..header.body_len as usize];
            let body_intact =
                body.len() >= LR_HEADER_LEN && crc32c::crc32c(body) == header.body_crc;
            let txtype = body_intact
                .then(|| u64::from_le_bytes(body[..8].try_into().expect("8 bytes")) & !TX_CI);
            self.entries.push(PmEntry {
                header,
                slot,
                body_intact,
                txtype,
            });
            offset += len;
        }
    }

    /// The datasets with entries of `claim_txg` or later.
    pub fn datasets(&self, claim_txg: u64) -> Vec<u64> {
        let mut objsets: Vec<u64> = (self.entries.iter())
            .filter(|e| e.header.txg >= claim_txg)
            .map(|e| e.header.objset)
            .collect();
        objsets.sort_unstable();
        objsets.dedup();
        objsets
    }
}

/// The end mark's header slot (`zil_pmem_end_mark`): [`END_WORD`] in each word of fields,
/// its low half in the checksum field, the reserved bytes zero.
pub fn end_mark() -> [u8; HEADER_SIZE] {
    let mut slot = [0; HEADER_SIZE];
    for word in slot[..HEADER_FIELDS].chunks_exact_mut(8) {
        word.copy_from_slice(&END_WORD.to_le_bytes());
    }
    slot[HEADER_FIELDS..][..4].copy_from_slice(&(END_WORD as u32).to_le_bytes());
    slot
}

/// Rewrites a region the engine wrote (format 1, from its superblock on) as the kernel
/// leaves one: format 2, the zero slot where each chunk's walk stops given the end mark.
/// Images of the kernel's format from the engine's writer, for tests of this reader.
pub fn engine_region_to_kernel(region: &mut [u8]) {
    let Ok(geometry) = Geometry::decode_version(region, ENGINE_FORMAT) else {
        panic!("not a region of the engine's format");
    };
    region[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&region[..32]);
    region[32..36].copy_from_slice(&crc.to_le_bytes());
    for c in 0..geometry.chunk_count {
        let chunk = &mut region[geometry.chunk_offset(c)..][..geometry.chunk_size];
        let mut offset = 0;
        while offset + HEADER_SIZE <= chunk.len() {
            match EntryHeader::decode(&chunk[offset..]) {
                Some(header) => offset += header.len as usize,
                None => {
                    chunk[offset..][..HEADER_SIZE].copy_from_slice(&end_mark());
                    break;
                }
            }
        }
    }
}

/// Whether a header slot that does not decode is damage rather than the log's end
/// (`zil_pmem_hdr_valid`): its reserved bytes written, or its checksum wrong and no word of
/// the end mark in it. A crash leaves the end mark there, or a header torn with it, which
/// keeps at least one of its words (8-byte stores persist whole).
fn corrupt(raw: &[u8]) -> bool {
    if EntryHeader::reserved_bytes_written(raw) {
        return true;
    }
    let word = |i: usize| u64::from_le_bytes(raw[i * 8..][..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(raw[HEADER_FIELDS..][..4].try_into().expect("4 bytes"));
    let end_or_torn = (0..HEADER_FIELDS / 8).any(|i| word(i) == END_WORD)
        || word(HEADER_FIELDS / 8) == u64::from(END_WORD as u32);
    crc != crc32c::crc32c(&raw[..HEADER_FIELDS]) && !end_or_torn
}
