//! The engine's format as OpenZFS with ZIL-PMEM's patches (targets/zil-pmem/openzfs) leaves
//! it on a pool's log vdev, read from an image: the region found and scanned as the
//! kernel's import scans it ([`PoolLog`]), each dataset's replay predicted as the kernel's
//! replay walks it ([`PoolLog::predict`]), and the txg the pool last synced, from the
//! uberblocks of its main vdev ([`last_synced_txg`]). Tests check what the kernel replayed
//! against these predictions; `zil-pmem-dump` prints them.

mod replay;
mod uberblock;

pub use replay::{DatasetReplay, LostEntry, LostReason};
pub use uberblock::last_synced_txg;

use crate::layout::{EntryHeader, Geometry, HEADER_FIELDS, HEADER_SIZE, SUPERBLOCK_SPACE};

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
    /// Headers no crash leaves (reserved bytes written, or a wrong checksum over fields
    /// that are all set): the kernel's "corrupt entry header" at load.
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
            .find_map(|at| Geometry::decode(&image[at..]).ok().map(|g| (at, g)))
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

/// Whether a header slot that does not decode is damage rather than a zeroed or torn
/// header (`zil_pmem_hdr_valid`): its reserved bytes written, or its checksum wrong though
/// every field the writer sets, the checksum last, is non-zero.
fn corrupt(raw: &[u8]) -> bool {
    if EntryHeader::reserved_bytes_written(raw) {
        return true;
    }
    let word = |i: usize| u64::from_le_bytes(raw[i * 8..][..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(raw[HEADER_FIELDS..][..4].try_into().expect("4 bytes"));
    let set =
        (0..7).all(|i| word(i) != 0) && word(7) as u32 != 0 && (word(7) >> 32) != 0 && crc != 0;
    set && crc != crc32c::crc32c(&raw[..HEADER_FIELDS])
}
