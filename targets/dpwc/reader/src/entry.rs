//! Log entries: the 256-byte header, its two checksums, and the walk of one chunk as
//! recovery does it (from offset 0 up to `used`, stopping at the first damaged header; a
//! damaged body costs its entry alone).

use crate::superblock::{u32_at, u64_at};
use serde::Serialize;
use thiserror::Error;

/// `magic` of an entry header.
pub const ENTRY_MAGIC: [u8; 4] = *b"DPWE";
/// An entry header: four lines; data follows at once, and every entry starts on this boundary.
pub const HEADER_LEN: usize = 256;
/// Bit 0 of `flags`: a discard, with no data; `len` is the discarded length.
pub const FLAG_DISCARD: u32 = 1;
/// The origin's sector; `len` is a multiple of it.
pub const SECTOR: u64 = 512;
const DATA_CRC_OFFSET: usize = 28;
/// The header's own checksum covers the bytes before it.
const HDR_CRC_OFFSET: usize = 32;

/// The fields of an entry header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Header {
    pub flags: u32,
    /// Per generation, from 1, in the order writers reserved their space.
    pub id: u64,
    /// First 512-byte sector on the origin.
    pub sector: u64,
    /// Bytes of data, or of the discarded range.
    pub len: u32,
    /// CRC of the data (0 for a discard).
    pub data_crc: u32,
    /// CRC of the header's bytes 0..32.
    pub hdr_crc: u32,
}

impl Header {
    pub fn is_discard(&self) -> bool {
        self.flags & FLAG_DISCARD != 0
    }

    /// Bytes of data that follow the header.
    pub fn data_len(&self) -> u64 {
        if self.is_discard() {
            0
        } else {
            u64::from(self.len)
        }
    }

    /// Bytes the entry occupies in its chunk: the header and its data, padded to 256.
    pub fn entry_len(&self) -> u64 {
        HEADER_LEN as u64 + self.data_len().next_multiple_of(HEADER_LEN as u64)
    }

    /// Origin sectors the entry covers.
    pub fn sectors(&self) -> u64 {
        u64::from(self.len) / SECTOR
    }

    /// The header as written to PM, with both CRCs as they are in the struct.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(&ENTRY_MAGIC);
        header[4..8].copy_from_slice(&self.flags.to_le_bytes());
        header[8..16].copy_from_slice(&self.id.to_le_bytes());
        header[16..24].copy_from_slice(&self.sector.to_le_bytes());
        header[24..28].copy_from_slice(&self.len.to_le_bytes());
        header[DATA_CRC_OFFSET..HDR_CRC_OFFSET].copy_from_slice(&self.data_crc.to_le_bytes());
        header[HDR_CRC_OFFSET..HDR_CRC_OFFSET + 4].copy_from_slice(&self.hdr_crc.to_le_bytes());
        header
    }

    fn decode(header: &[u8]) -> Self {
        Self {
            flags: u32_at(header, 4),
            id: u64_at(header, 8),
            sector: u64_at(header, 16),
            len: u32_at(header, 24),
            data_crc: u32_at(header, DATA_CRC_OFFSET),
            hdr_crc: u32_at(header, HDR_CRC_OFFSET),
        }
    }
}

/// The header's checksum: of its bytes before `hdr_crc` (`data_crc` included).
pub fn header_crc(header: &[u8; HEADER_LEN]) -> u32 {
    crc32c::crc32c(&header[..HDR_CRC_OFFSET])
}

/// A valid entry found by the walk of a chunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry<'a> {
    /// Index of the generation in the table (not its id).
    pub generation: u32,
    pub gen_id: u64,
    pub chunk: u32,
    /// Byte offset of the header in its chunk.
    pub offset: u64,
    #[serde(flatten)]
    pub header: Header,
    /// The data to write (empty for a discard).
    #[serde(skip)]
    pub data: &'a [u8],
}

/// Why the walk of a chunk stopped before `used`.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Corruption {
    #[error("bad magic {found:02x?}")]
    Magic { found: [u8; 4] },
    #[error("unknown flags {flags:#x} (only bit 0, DISCARD, is defined)")]
    Flags { flags: u32 },
    #[error("len {len} is not a positive multiple of 512")]
    Len { len: u32 },
    #[error("sectors {sector}..{end} lie beyond the origin's {origin_sectors} sectors")]
    BeyondOrigin {
        sector: u64,
        end: u128,
        origin_sectors: u64,
    },
    #[error("the entry ends at chunk offset {end}, beyond used ({used}) or the chunk's end ({chunk_size})")]
    PastUsed {
        end: u64,
        used: u64,
        chunk_size: u32,
    },
    #[error("header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    HeaderCrc { stored: u32, computed: u32 },
    /// The only damage the walk goes on after: the intact header gives the entry's length.
    #[error("data checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    DataCrc { stored: u32, computed: u32 },
}

/// A damaged entry: never replayed. With a damaged header nothing after it in its chunk is
/// either; a damaged body ([`Corruption::DataCrc`]) costs this entry alone.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize)]
#[error("generation {generation} (id {gen_id}) chunk {chunk} offset {offset}: {reason}")]
pub struct CorruptEntry {
    pub generation: u32,
    pub gen_id: u64,
    pub chunk: u32,
    pub offset: u64,
    /// The header's fields, when its magic was right.
    pub header: Option<Header>,
    pub reason: Corruption,
}

/// Where a chunk lies and what recovery knows about it.
pub(crate) struct ChunkWalk<'a> {
    pub generation: u32,
    pub gen_id: u64,
    pub chunk: u32,
    /// The chunk's bytes.
    pub bytes: &'a [u8],
    pub used: u64,
    pub origin_sectors: u64,
}

impl<'a> ChunkWalk<'a> {
    /// The valid entries from offset 0 up to `min(used, chunk size)`, and the damaged ones:
    /// bodies skipped, then the header that stopped the walk if one did.
    pub fn walk(&self) -> (Vec<Entry<'a>>, Vec<CorruptEntry>) {
        let limit = self.used.min(self.bytes.len() as u64);
        let mut entries = Vec::new();
        let mut corrupt = Vec::new();
        let mut offset = 0;
        while offset < limit {
            match self.entry_at(offset, limit) {
                Ok(entry) => {
                    offset += entry.header.entry_len();
                    entries.push(entry);
                }
                Err((header, reason)) => {
                    let next = match (&reason, header) {
                        (Corruption::DataCrc { .. }, Some(h)) => Some(offset + h.entry_len()),
                        _ => None,
                    };
                    corrupt.push(CorruptEntry {
                        generation: self.generation,
                        gen_id: self.gen_id,
                        chunk: self.chunk,
                        offset,
                        header,
                        reason,
                    });
                    match next {
                        Some(next) => offset = next,
                        None => break,
                    }
                }
            }
        }
        (entries, corrupt)
    }

    fn entry_at(&self, offset: u64, limit: u64) -> Result<Entry<'a>, (Option<Header>, Corruption)> {
        let past = |end: u64| Corruption::PastUsed {
            end,
            used: self.used,
            chunk_size: self.bytes.len() as u32,
        };
        let header_end = offset + HEADER_LEN as u64;
        if header_end > limit {
            return Err((None, past(header_end)));
        }
        let raw: &[u8; HEADER_LEN] = self.bytes[offset as usize..header_end as usize]
            .try_into()
            .unwrap();
        let found: [u8; 4] = raw[..4].try_into().unwrap();
        if found != ENTRY_MAGIC {
            return Err((None, Corruption::Magic { found }));
        }
        let header = Header::decode(raw);
        let fail = |reason| Err((Some(header), reason));
        let computed = header_crc(raw);
        if computed != header.hdr_crc {
            return fail(Corruption::HeaderCrc {
                stored: header.hdr_crc,
                computed,
            });
        }
        if header.flags & !FLAG_DISCARD != 0 {
            return fail(Corruption::Flags {
                flags: header.flags,
            });
        }
        if header.len == 0 || !u64::from(header.len).is_multiple_of(SECTOR) {
            return fail(Corruption::Len { len: header.len });
        }
        let end_sector = u128::from(header.sector) + u128::from(header.sectors());
        if end_sector > u128::from(self.origin_sectors) {
            return fail(Corruption::BeyondOrigin {
                sector: header.sector,
                end: end_sector,
                origin_sectors: self.origin_sectors,
            });
        }
        if offset + header.entry_len() > limit {
            return fail(past(offset + header.entry_len()));
        }
        let data = &self.bytes[header_end as usize..(header_end + header.data_len()) as usize];
        let computed = crc32c::crc32c(data);
        if computed != header.data_crc {
            return fail(Corruption::DataCrc {
                stored: header.data_crc,
                computed,
            });
        }
        Ok(Entry {
            generation: self.generation,
            gen_id: self.gen_id,
            chunk: self.chunk,
            offset,
            header,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC-32C of the header's first 32 bytes, `b"DPWE" + struct.pack("<IQQII", 0, 1, 8,
    /// 512, 0xdead)` in Python, by a bitwise CRC-32C (reflected 0x82F63B78) checked
    /// against the standard's 0xE3069283 for `b"123456789"`.
    #[test]
    fn the_header_crc_is_crc32c_of_its_first_32_bytes() {
        let write = Header {
            flags: 0,
            id: 1,
            sector: 8,
            len: 512,
            data_crc: 0xdead,
            hdr_crc: 0x1234,
        };
        assert_eq!(header_crc(&write.encode()), 0x5344b646);
    }
}
