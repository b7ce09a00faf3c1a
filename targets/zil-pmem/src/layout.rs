//! The on-media format of the PM region: superblock, chunk placement and entry headers.
//!
//! ```text
//! region:  [superblock, SUPERBLOCK_SPACE bytes][chunk 0][chunk 1]...[chunk n-1]
//! chunk:   [entry][entry]...[zero header, or the chunk's end]
//! entry:   [header, 256 bytes][body][padding to a multiple of 256]
//! ```
//!
//! All integers are little-endian. Every field of a header that the writer fills is
//! non-zero, so a header torn by a crash shows a zero field even where the checksum alone
//! could be fooled, and an all-zero header ends a chunk.

/// Bytes of an entry header, and the granularity entries are padded to (Optane's internal
/// write unit).
pub const HEADER_SIZE: usize = 256;
/// Bytes reserved for the superblock; chunks start after it.
pub const SUPERBLOCK_SPACE: usize = 4096;
/// Transaction groups whose entry counts one dependency record carries: the open,
/// quiescing and syncing txg of OpenZFS (`TXG_CONCURRENT_STATES`).
pub const DEP_TXGS: usize = 3;

const MAGIC: [u8; 8] = *b"ZILPMEM\0";
/// The format this library writes and reads.
pub const FORMAT_VERSION: u32 = 1;
const SUPERBLOCK_LEN: usize = 40;
/// Bytes of the header that the checksum covers; the checksum follows, then zeros.
pub(crate) const HEADER_FIELDS: usize = 120;

/// Bytes an entry with a body of `body_len` bytes occupies in a chunk.
pub const fn entry_len(body_len: usize) -> usize {
    HEADER_SIZE + body_len.div_ceil(HEADER_SIZE) * HEADER_SIZE
}

/// The chunk geometry a region was formatted with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub chunk_size: usize,
    pub chunk_count: usize,
}

impl Geometry {
    pub fn chunk_offset(&self, index: usize) -> usize {
        SUPERBLOCK_SPACE + index * self.chunk_size
    }

    pub(crate) fn encode(&self) -> [u8; SUPERBLOCK_LEN] {
        let mut out = [0; SUPERBLOCK_LEN];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(HEADER_SIZE as u32).to_le_bytes());
        out[16..24].copy_from_slice(&(self.chunk_size as u64).to_le_bytes());
        out[24..32].copy_from_slice(&(self.chunk_count as u64).to_le_bytes());
        let crc = crc32c::crc32c(&out[0..32]);
        out[32..36].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, SuperblockError> {
        Self::decode_version(bytes, FORMAT_VERSION)
    }

    /// The geometry of a superblock of format `expected` (the kernel's is another).
    pub(crate) fn decode_version(bytes: &[u8], expected: u32) -> Result<Self, SuperblockError> {
        let bytes = &bytes[..SUPERBLOCK_LEN];
        if bytes[0..8] != MAGIC {
            return Err(SuperblockError::NotFormatted);
        }
        if crc32c::crc32c(&bytes[0..32]) != u32_at(bytes, 32) {
            return Err(SuperblockError::Corrupt);
        }
        let version = u32_at(bytes, 8);
        let header_size = u32_at(bytes, 12) as usize;
        if version != expected || header_size != HEADER_SIZE {
            return Err(SuperblockError::Version {
                version,
                header_size,
            });
        }
        Ok(Geometry {
            chunk_size: u64_at(bytes, 16) as usize,
            chunk_count: u64_at(bytes, 24) as usize,
        })
    }
}

pub(crate) enum SuperblockError {
    NotFormatted,
    Corrupt,
    Version { version: u32, header_size: usize },
}

/// Where an entry stands in replay order: its generation, then its id in that generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub gen: u64,
    pub id: u64,
}

/// What an entry needs replayed before it: how many entries of each txg the previous
/// generation had. A generation of 0 means no dependency (the log's first generation, or
/// the first after a replay).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dependency {
    pub last_gen: u64,
    /// (txg, count) pairs; unused slots are (0, 0).
    pub counts: [(u64, u64); DEP_TXGS],
}

/// An entry header as stored before each body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub objset: u64,
    pub pool_guid: u64,
    pub log_guid: u64,
    pub txg: u64,
    pub position: Position,
    /// Bytes of the entry in its chunk: header, body and padding.
    pub len: u64,
    pub body_len: u32,
    pub body_crc: u32,
    pub dep: Dependency,
}

impl EntryHeader {
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0; HEADER_SIZE];
        let words = [
            self.objset,
            self.pool_guid,
            self.log_guid,
            self.txg,
            self.position.gen,
            self.position.id,
            self.len,
            u64::from(self.body_len) | u64::from(self.body_crc) << 32,
            self.dep.last_gen,
        ];
        let counts = self.dep.counts.iter().flat_map(|&(txg, n)| [txg, n]);
        for (i, word) in words.into_iter().chain(counts).enumerate() {
            out[i * 8..][..8].copy_from_slice(&word.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out[..HEADER_FIELDS]);
        out[HEADER_FIELDS..][..4].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Whether the header slot in `bytes` has a non-zero byte after its checksum. Every
    /// slot claim reads was zeroed before its header was written, and a header has zeros
    /// there, so no crash leaves such a slot: only damage (media, stray writes) does.
    pub fn reserved_bytes_written(bytes: &[u8]) -> bool {
        bytes[HEADER_FIELDS + 4..HEADER_SIZE]
            .iter()
            .any(|&b| b != 0)
    }

    /// The header in `bytes`, or `None` for zeros, a torn write or garbage.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes = &bytes[..HEADER_SIZE];
        if crc32c::crc32c(&bytes[..HEADER_FIELDS]) != u32_at(bytes, HEADER_FIELDS)
            || Self::reserved_bytes_written(bytes)
        {
            return None;
        }
        let word = |i: usize| u64_at(bytes, i * 8);
        let mut counts = [(0, 0); DEP_TXGS];
        for (i, slot) in counts.iter_mut().enumerate() {
            *slot = (word(9 + 2 * i), word(10 + 2 * i));
        }
        let header = EntryHeader {
            objset: word(0),
            pool_guid: word(1),
            log_guid: word(2),
            txg: word(3),
            position: Position {
                gen: word(4),
                id: word(5),
            },
            len: word(6),
            body_len: word(7) as u32,
            body_crc: (word(7) >> 32) as u32,
            dep: Dependency {
                last_gen: word(8),
                counts,
            },
        };
        let required = [
            header.objset,
            header.pool_guid,
            header.log_guid,
            header.txg,
            header.position.gen,
            header.position.id,
            header.len,
        ];
        let consistent = header.len == entry_len(header.body_len as usize) as u64;
        (required.iter().all(|&field| field != 0) && consistent).then_some(header)
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> EntryHeader {
        EntryHeader {
            objset: 7,
            pool_guid: 11,
            log_guid: 13,
            txg: 5,
            position: Position { gen: 3, id: 2 },
            len: entry_len(300) as u64,
            body_len: 300,
            body_crc: 0xdead_beef,
            dep: Dependency {
                last_gen: 2,
                counts: [(4, 1), (5, 2), (0, 0)],
            },
        }
    }

    #[test]
    fn headers_round_trip_and_every_torn_field_is_rejected() {
        let h = header();
        let bytes = h.encode();
        assert_eq!(EntryHeader::decode(&bytes), Some(h));
        assert_eq!(EntryHeader::decode(&[0; HEADER_SIZE]), None);
        // Each required field zeroed, with a checksum that matches: still rejected.
        for field in 0..7 {
            let mut torn = bytes;
            torn[field * 8..][..8].fill(0);
            let crc = crc32c::crc32c(&torn[..HEADER_FIELDS]);
            torn[HEADER_FIELDS..][..4].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(EntryHeader::decode(&torn), None, "field {field}");
        }
        let mut flipped = bytes;
        flipped[70] ^= 4;
        assert_eq!(EntryHeader::decode(&flipped), None);
    }

    #[test]
    fn entries_are_padded_to_whole_headers() {
        assert_eq!(entry_len(0), 256);
        assert_eq!(entry_len(1), 512);
        assert_eq!(entry_len(256), 512);
        assert_eq!(entry_len(257), 768);
    }
}
