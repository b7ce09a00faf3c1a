//! The superblock (the first line of the PM device) and the geometry it fixes: where the
//! generation table's counters and each chunk lie.

use serde::Serialize;
use thiserror::Error;

/// `magic` of the superblock.
pub const MAGIC: [u8; 8] = *b"DPWCSUP1";
/// The layout version this crate reads.
pub const VERSION: u32 = 4;
/// A cache line; every counter of the generation table has one of its own.
pub const LINE: u64 = 64;
/// The superblock page: the superblock line, then zeros.
pub const PAGE: u64 = 4096;
/// Where the generation table starts.
pub const META_OFFSET: u64 = PAGE;
/// The smallest chunk: two pages.
pub const MIN_CHUNK_SIZE: u32 = 8192;
/// Bytes 0..60 are covered by the CRC stored at 60.
const CRC_OFFSET: usize = 60;
/// The superblock's size on PM.
pub const SUPERBLOCK_LEN: usize = 64;

/// The parsed and validated superblock: the geometry of the cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Superblock {
    pub version: u32,
    /// Bytes per chunk, a multiple of 4096, at least 8192.
    pub chunk_size: u32,
    pub chunks_per_gen: u32,
    pub generations: u32,
    /// 512-byte sectors of the origin the cache was formatted for.
    pub origin_sectors: u64,
    pub meta_offset: u64,
    pub data_offset: u64,
}

/// Why an image is not a DPWC cache this crate can read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SuperblockError {
    #[error(
        "the image is {len} bytes, smaller than the {PAGE}-byte superblock page: not a DPWC cache"
    )]
    TooSmall { len: u64 },
    #[error("no DPWC superblock (magic {found:02x?}, expected \"DPWCSUP1\"): not a DPWC cache, or never formatted (the table option `format` writes one)")]
    NotDpwc { found: [u8; 8] },
    #[error("superblock version {found}; this reader knows version {VERSION} only")]
    Version { found: u32 },
    #[error("superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the superblock is damaged")]
    Crc { stored: u32, computed: u32 },
    #[error("chunk_size {0} is not a multiple of 4096 of at least {MIN_CHUNK_SIZE}")]
    ChunkSize(u32),
    #[error("chunks_per_gen is 0; a generation needs at least one chunk")]
    NoChunks,
    #[error("generations is {0}; the cache needs at least 2")]
    Generations(u32),
    #[error("meta_offset is {0}; the generation table starts at {META_OFFSET}")]
    MetaOffset(u64),
    #[error("data_offset {data_offset} is not 4096-aligned or lies inside the generation table (which ends at {table_end})")]
    DataOffset { data_offset: u64, table_end: u64 },
    #[error("the data region ends at byte {end}, beyond the image's {len} bytes: the image is truncated or the geometry is wrong")]
    DataBeyondImage { end: u128, len: u64 },
}

impl Superblock {
    /// The geometry of a new cache, with the table and data placed as `format` places them:
    /// the data at the first page boundary after the table.
    pub fn new(
        chunk_size: u32,
        chunks_per_gen: u32,
        generations: u32,
        origin_sectors: u64,
    ) -> Self {
        let table_end = META_OFFSET + u64::from(generations) * gen_block(chunks_per_gen);
        Self {
            version: VERSION,
            chunk_size,
            chunks_per_gen,
            generations,
            origin_sectors,
            meta_offset: META_OFFSET,
            data_offset: table_end.next_multiple_of(PAGE),
        }
    }

    /// Reads and validates the superblock of `image`, a whole PM device.
    pub fn parse(image: &[u8]) -> Result<Self, SuperblockError> {
        let len = image.len() as u64;
        if len < PAGE {
            return Err(SuperblockError::TooSmall { len });
        }
        let line = &image[..SUPERBLOCK_LEN];
        let magic: [u8; 8] = line[..8].try_into().unwrap();
        if magic != MAGIC {
            return Err(SuperblockError::NotDpwc { found: magic });
        }
        let version = u32_at(line, 8);
        if version != VERSION {
            return Err(SuperblockError::Version { found: version });
        }
        let stored = u32_at(line, CRC_OFFSET);
        let computed = crc32c::crc32c(&line[..CRC_OFFSET]);
        if stored != computed {
            return Err(SuperblockError::Crc { stored, computed });
        }
        let superblock = Self {
            version,
            chunk_size: u32_at(line, 12),
            chunks_per_gen: u32_at(line, 16),
            generations: u32_at(line, 20),
            origin_sectors: u64_at(line, 24),
            meta_offset: u64_at(line, 32),
            data_offset: u64_at(line, 40),
        };
        superblock.check_geometry(len)?;
        Ok(superblock)
    }

    fn check_geometry(&self, image_len: u64) -> Result<(), SuperblockError> {
        if self.chunk_size < MIN_CHUNK_SIZE || !u64::from(self.chunk_size).is_multiple_of(PAGE) {
            return Err(SuperblockError::ChunkSize(self.chunk_size));
        }
        if self.chunks_per_gen == 0 {
            return Err(SuperblockError::NoChunks);
        }
        if self.generations < 2 {
            return Err(SuperblockError::Generations(self.generations));
        }
        if self.meta_offset != META_OFFSET {
            return Err(SuperblockError::MetaOffset(self.meta_offset));
        }
        // u32 × u32 × u64 products fit in u128; the image length bounds what follows.
        let table_end = u128::from(META_OFFSET)
            + u128::from(self.generations) * u128::from(gen_block(self.chunks_per_gen));
        if !self.data_offset.is_multiple_of(PAGE) || u128::from(self.data_offset) < table_end {
            return Err(SuperblockError::DataOffset {
                data_offset: self.data_offset,
                table_end: table_end as u64,
            });
        }
        let end = u128::from(self.data_offset) + self.data_len();
        if end > u128::from(image_len) {
            return Err(SuperblockError::DataBeyondImage {
                end,
                len: image_len,
            });
        }
        Ok(())
    }

    /// The superblock line as `format` writes it, CRC included.
    pub fn encode(&self) -> [u8; SUPERBLOCK_LEN] {
        let mut line = [0u8; SUPERBLOCK_LEN];
        line[..8].copy_from_slice(&MAGIC);
        line[8..12].copy_from_slice(&self.version.to_le_bytes());
        line[12..16].copy_from_slice(&self.chunk_size.to_le_bytes());
        line[16..20].copy_from_slice(&self.chunks_per_gen.to_le_bytes());
        line[20..24].copy_from_slice(&self.generations.to_le_bytes());
        line[24..32].copy_from_slice(&self.origin_sectors.to_le_bytes());
        line[32..40].copy_from_slice(&self.meta_offset.to_le_bytes());
        line[40..48].copy_from_slice(&self.data_offset.to_le_bytes());
        let crc = crc32c::crc32c(&line[..CRC_OFFSET]);
        line[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
        line
    }

    /// Bytes of all chunks of all generations.
    fn data_len(&self) -> u128 {
        u128::from(self.generations) * u128::from(self.chunks_per_gen) * u128::from(self.chunk_size)
    }

    /// The size of a PM device that holds exactly this cache.
    pub fn image_len(&self) -> u64 {
        (u128::from(self.data_offset) + self.data_len()) as u64
    }

    /// Byte offset of generation `generation`'s `gen_id` (line 0 of its table block).
    pub fn gen_id_offset(&self, generation: u32) -> u64 {
        self.meta_offset + u64::from(generation) * gen_block(self.chunks_per_gen)
    }

    /// Byte offset of the `used` counter of chunk `chunk` of generation `generation`.
    pub fn used_offset(&self, generation: u32, chunk: u32) -> u64 {
        self.gen_id_offset(generation) + LINE * (1 + u64::from(chunk))
    }

    /// Byte offset of chunk `chunk` of generation `generation`.
    pub fn chunk_offset(&self, generation: u32, chunk: u32) -> u64 {
        let index = u64::from(generation) * u64::from(self.chunks_per_gen) + u64::from(chunk);
        self.data_offset + index * u64::from(self.chunk_size)
    }
}

/// Bytes of one generation's table block: the gen_id line and a line per chunk.
fn gen_block(chunks_per_gen: u32) -> u64 {
    LINE * (1 + u64::from(chunks_per_gen))
}

pub(crate) fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap())
}

pub(crate) fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image_of(superblock: &Superblock) -> Vec<u8> {
        let mut image = vec![0; superblock.image_len() as usize];
        image[..SUPERBLOCK_LEN].copy_from_slice(&superblock.encode());
        image
    }

    #[test]
    fn a_formatted_superblock_reads_back() {
        let superblock = Superblock::new(8192, 3, 4, 1 << 20);
        // 4 generations × 4 lines = 1024 bytes of table after 4096: data at 8192.
        assert_eq!(superblock.data_offset, 8192);
        assert_eq!(superblock.used_offset(1, 2), 4096 + 256 + 3 * 64);
        assert_eq!(superblock.chunk_offset(1, 2), 8192 + 5 * 8192);
        assert_eq!(Superblock::parse(&image_of(&superblock)), Ok(superblock));
    }

    /// The CRC is CRC-32C of bytes 0..60 (the value from a bitwise CRC-32C; zlib's
    /// crc32 of layout 2's line was 0xda40f334, layout 3's CRC-32C 0x6c907a45).
    #[test]
    fn the_crc_is_crc32c() {
        let line = Superblock::new(8192, 2, 3, 1024).encode();
        assert_eq!(line[60..], 0x1fac2e00u32.to_le_bytes());
    }

    #[test]
    fn each_broken_field_is_its_own_error() {
        let good = Superblock::new(8192, 2, 2, 100);
        let broken = |edit: &dyn Fn(&mut Superblock)| {
            let mut superblock = good.clone();
            edit(&mut superblock);
            let mut image = image_of(&good);
            image[..SUPERBLOCK_LEN].copy_from_slice(&superblock.encode());
            Superblock::parse(&image).unwrap_err()
        };
        assert_eq!(
            broken(&|s| s.version = 1),
            SuperblockError::Version { found: 1 }
        );
        assert_eq!(
            broken(&|s| s.chunk_size = 4096),
            SuperblockError::ChunkSize(4096)
        );
        assert_eq!(
            broken(&|s| s.chunk_size = 10000),
            SuperblockError::ChunkSize(10000)
        );
        assert_eq!(broken(&|s| s.chunks_per_gen = 0), SuperblockError::NoChunks);
        assert_eq!(
            broken(&|s| s.generations = 1),
            SuperblockError::Generations(1)
        );
        assert_eq!(
            broken(&|s| s.meta_offset = 0),
            SuperblockError::MetaOffset(0)
        );
        assert!(matches!(
            broken(&|s| s.data_offset = 4096),
            SuperblockError::DataOffset {
                data_offset: 4096,
                ..
            }
        ));
        assert!(matches!(
            broken(&|s| s.data_offset = 8192 + 100),
            SuperblockError::DataOffset { .. }
        ));
        assert!(matches!(
            broken(&|s| s.generations = 3),
            SuperblockError::DataBeyondImage { .. }
        ));
    }

    #[test]
    fn a_mismatching_crc_is_an_error() {
        let mut image = image_of(&Superblock::new(8192, 1, 2, 100));
        image[24] ^= 1; // origin_sectors
        assert!(matches!(
            Superblock::parse(&image),
            Err(SuperblockError::Crc { .. })
        ));
    }

    #[test]
    fn a_foreign_or_short_image_is_not_dpwc() {
        assert_eq!(
            Superblock::parse(&[0; 100]),
            Err(SuperblockError::TooSmall { len: 100 })
        );
        assert!(matches!(
            Superblock::parse(&[0; 4096]),
            Err(SuperblockError::NotDpwc { .. })
        ));
    }
}
