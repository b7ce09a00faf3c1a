//! The on-media format: superblock, chunk placement and entry headers.
//!
//! ```text
//! region:  [superblock, SUPERBLOCK_SPACE bytes][chunk 0][chunk 1]...[chunk n-1]
//! chunk:   [entry][entry]...[zero header or end of chunk]
//! entry:   [header line, 64 bytes][body][padding up to the alignment]
//! ```
//!
//! All integers are little-endian. The header has a cache line of its own so that the body
//! starts on a line boundary (whole-line non-temporal stores) and so that the header and the
//! body persist independently, which is exactly what the two fences of the write path order.

/// A cache line: the unit of flushes and of the stores a [`crate::PmAccess`] issues.
pub const LINE: usize = 64;
/// Bytes reserved for the superblock at the start of the region; chunks start after it.
/// A multiple of every supported alignment.
pub const SUPERBLOCK_SPACE: usize = 4096;
/// Bytes an entry header occupies before its body.
pub const HEADER_SPACE: usize = LINE;
/// Bytes of the encoded header; the rest of the header line is zero.
pub(crate) const HEADER_LEN: usize = 24;
/// Where the header's last 8-byte word starts: its CRC32C and 4 zero bytes.
const CHECKSUM_WORD: usize = 16;
/// The largest chunk: body lengths are stored as `u32`.
pub(crate) const MAX_CHUNK_SIZE: usize = 1 << 32;

const MAGIC: [u8; 8] = *b"PERSIMRB";
const VERSION: u32 = 1;
const SUPERBLOCK_LEN: usize = 36;

/// Bytes an entry with a body of `body_len` bytes occupies in a chunk.
pub(crate) const fn entry_len(body_len: usize, align: usize) -> usize {
    (HEADER_SPACE + body_len).div_ceil(align) * align
}

/// Offset of chunk `index` in the region.
pub(crate) const fn chunk_offset(index: usize, chunk_size: usize) -> usize {
    SUPERBLOCK_SPACE + index * chunk_size
}

/// An entry header as stored before each body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub id: u64,
    pub body_len: u32,
    pub body_crc: u32,
}

/// What a header slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderSlot {
    /// All zero: the end of the chunk's entries.
    Zero,
    /// Not a whole header, but what a crash can leave of one: some of its 8-byte words
    /// still zero (the slot was durably zero before the header was written); with the
    /// length word written, the body length it names; whether the checksum word is
    /// written (a release zeroes it first). Also the end.
    Torn {
        body_len: Option<u32>,
        checksum_written: bool,
    },
    /// Every word written and still not a valid header: no crash leaves that, so the
    /// header was damaged (media corruption, a stray write).
    Damaged,
    Valid(Header),
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0; HEADER_LEN];
        out[0..8].copy_from_slice(&self.id.to_le_bytes());
        out[8..12].copy_from_slice(&self.body_len.to_le_bytes());
        out[12..16].copy_from_slice(&self.body_crc.to_le_bytes());
        let crc = crc32c::crc32c(&out[0..16]);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The encoded header with its checksum word zeroed: what a release writes first, so
    /// that no crash during a release leaves a first header whose checksum word is written
    /// and whose id word is not (docs/design/ringbuf.md, "Torn or damaged?").
    pub fn without_checksum(bytes: &[u8; HEADER_LEN]) -> [u8; HEADER_LEN] {
        let mut out = *bytes;
        out[CHECKSUM_WORD..].fill(0);
        out
    }

    /// A header whose id word is zero but whose length and checksum words are written,
    /// valid with an id of one set bit: a flipped bit took that id (or a crash lost the
    /// id word of an append whose id it was, which is then recovered whole). Without
    /// this, the last entry of a chunk with such an id, acknowledged, looked like a torn
    /// append and was lost without an error. A CRC32C matches one of the 64 candidates
    /// by chance with a probability of 2^-26.
    fn with_one_bit_id(bytes: &[u8; HEADER_LEN]) -> Option<Header> {
        let stored_crc = u32::from_le_bytes(bytes[16..20].try_into().unwrap());
        if bytes[0..8] != [0; 8] || bytes[8..16] == [0; 8] || stored_crc == 0 {
            return None;
        }
        if bytes[20..] != [0; 4] {
            return None;
        }
        let mut candidate = *bytes;
        (0..64).map(|bit| 1u64 << bit).find_map(|id| {
            candidate[0..8].copy_from_slice(&id.to_le_bytes());
            (crc32c::crc32c(&candidate[0..16]) == stored_crc).then(|| Header {
                id,
                body_len: u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
                body_crc: u32::from_le_bytes(bytes[12..16].try_into().unwrap()),
            })
        })
    }

    pub fn decode(bytes: &[u8; HEADER_LEN]) -> HeaderSlot {
        if bytes.iter().all(|&b| b == 0) {
            return HeaderSlot::Zero;
        }
        let stored_crc = u32::from_le_bytes(bytes[16..20].try_into().unwrap());
        let id = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
        // Ids start at 1 and the reserved bytes are written as zero; anything else was not
        // written by `encode`.
        if stored_crc != crc32c::crc32c(&bytes[0..16]) || id == 0 || bytes[20..] != [0; 4] {
            let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
            if (0..HEADER_LEN).step_by(8).all(|at| word(at) != 0) {
                return HeaderSlot::Damaged;
            }
            if let Some(header) = Self::with_one_bit_id(bytes) {
                return HeaderSlot::Valid(header);
            }
            let body_len =
                (word(8) != 0).then(|| u32::from_le_bytes(bytes[8..12].try_into().unwrap()));
            return HeaderSlot::Torn {
                body_len,
                checksum_written: word(CHECKSUM_WORD) != 0,
            };
        }
        HeaderSlot::Valid(Header {
            id,
            body_len: u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
            body_crc: u32::from_le_bytes(bytes[12..16].try_into().unwrap()),
        })
    }
}

/// Chunk geometry, stored in the superblock so that recovery never depends on how the
/// program that opens the log is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Entry alignment in bytes.
    pub align: usize,
    /// Bytes per chunk, a multiple of `align`.
    pub chunk_size: usize,
    /// Number of chunks after the superblock.
    pub chunk_count: usize,
}

/// What the first bytes of a region say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SuperblockSlot {
    NoMagic,
    BadChecksum,
    BadVersion(u32),
    Valid(Geometry),
}

impl Geometry {
    pub(crate) fn encode(&self) -> [u8; SUPERBLOCK_LEN] {
        let mut out = [0; SUPERBLOCK_LEN];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(self.align as u32).to_le_bytes());
        out[16..24].copy_from_slice(&(self.chunk_size as u64).to_le_bytes());
        out[24..32].copy_from_slice(&(self.chunk_count as u64).to_le_bytes());
        let crc = crc32c::crc32c(&out[0..32]);
        out[32..36].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8; SUPERBLOCK_LEN]) -> SuperblockSlot {
        if bytes[0..8] != MAGIC {
            return SuperblockSlot::NoMagic;
        }
        if u32::from_le_bytes(bytes[32..36].try_into().unwrap()) != crc32c::crc32c(&bytes[0..32]) {
            return SuperblockSlot::BadChecksum;
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        if version != VERSION {
            return SuperblockSlot::BadVersion(version);
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        SuperblockSlot::Valid(Geometry {
            align: u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize,
            // Saturate so that absurd values fail the caller's range checks instead of wrapping.
            chunk_size: usize::try_from(u64_at(16)).unwrap_or(usize::MAX),
            chunk_count: usize::try_from(u64_at(24)).unwrap_or(usize::MAX),
        })
    }

    /// The encoded superblock's length, for reading it back.
    pub(crate) const ENCODED_LEN: usize = SUPERBLOCK_LEN;

    /// Largest body an entry can carry in this geometry.
    pub fn max_body_len(&self) -> usize {
        self.chunk_size - HEADER_SPACE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_every_single_byte_change_is_damage() {
        let header = Header {
            id: 7,
            body_len: 300,
            body_crc: 0xdead_beef,
        };
        let bytes = header.encode();
        assert_eq!(Header::decode(&bytes), HeaderSlot::Valid(header));
        for at in 0..HEADER_LEN {
            let mut torn = bytes;
            torn[at] ^= 0x40;
            assert_eq!(
                Header::decode(&torn),
                HeaderSlot::Damaged,
                "flipped byte {at}"
            );
        }
    }

    #[test]
    fn zero_header_is_the_end_and_a_half_written_header_is_torn() {
        assert_eq!(Header::decode(&[0; HEADER_LEN]), HeaderSlot::Zero);
        // Id 3: two bits set (an id word of one set bit is restored, below).
        let bytes = Header {
            id: 3,
            body_len: 1,
            body_crc: 1,
        }
        .encode();
        // A crash can persist any of the header's 8-byte units but not all.
        for written in 1..(1 << (HEADER_LEN / 8)) - 1 {
            let mut torn = [0; HEADER_LEN];
            for unit in (0..HEADER_LEN / 8).filter(|unit| written & (1 << unit) != 0) {
                torn[unit * 8..unit * 8 + 8].copy_from_slice(&bytes[unit * 8..unit * 8 + 8]);
            }
            let body_len = (written & 0b010 != 0).then_some(1);
            let checksum_written = written & 0b100 != 0;
            assert_eq!(
                Header::decode(&torn),
                HeaderSlot::Torn {
                    body_len,
                    checksum_written
                },
                "units {written:03b}"
            );
        }
        let one_bit = Header {
            id: 4,
            body_len: 1,
            body_crc: 1,
        };
        let mut without_id = one_bit.encode();
        without_id[0..8].fill(0);
        assert_eq!(Header::decode(&without_id), HeaderSlot::Valid(one_bit));
    }

    #[test]
    fn superblock_round_trips_and_detects_damage() {
        let geometry = Geometry {
            align: 256,
            chunk_size: 1 << 20,
            chunk_count: 12,
        };
        let bytes = geometry.encode();
        assert_eq!(Geometry::decode(&bytes), SuperblockSlot::Valid(geometry));
        let mut damaged = bytes;
        damaged[20] ^= 1;
        assert_eq!(Geometry::decode(&damaged), SuperblockSlot::BadChecksum);
        assert_eq!(
            Geometry::decode(&[0; SUPERBLOCK_LEN]),
            SuperblockSlot::NoMagic
        );
    }

    #[test]
    fn entries_are_padded_to_the_alignment_after_a_header_line() {
        assert_eq!(entry_len(0, 64), 64);
        assert_eq!(entry_len(1, 64), 128);
        assert_eq!(entry_len(256, 64), 320);
        assert_eq!(entry_len(256, 256), 512);
        assert_eq!(entry_len(192, 256), 256);
    }
}
