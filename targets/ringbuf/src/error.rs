//! What can go wrong, as typed errors whose messages say what to do.

use crate::committers::MAX_COMMITTERS;
use crate::layout::{MAX_CHUNK_SIZE, SUPERBLOCK_SPACE};

/// Formatting or opening a region failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error(
        "the region starts at {addr:#x}, not at a multiple of the {align}-byte entry \
         alignment; map or allocate it at a page boundary"
    )]
    MisalignedRegion { addr: usize, align: usize },
    #[error("{count} committers requested; a ring buffer has 1..={MAX_COMMITTERS}")]
    BadCommitterCount { count: usize },
    #[error(
        "chunk size {chunk_size} is not a non-zero multiple of the {align}-byte alignment \
         of at most {MAX_CHUNK_SIZE} bytes; pick another chunk size"
    )]
    BadChunkSize { chunk_size: usize, align: usize },
    #[error(
        "a region of {len} bytes has no room for a {chunk_size}-byte chunk after the \
         {SUPERBLOCK_SPACE}-byte superblock; use a larger region or smaller chunks"
    )]
    RegionTooSmall { len: usize, chunk_size: usize },
    #[error("the region holds no ring buffer (no superblock); format it first")]
    NotFormatted,
    #[error(
        "the superblock's checksum does not match: it is damaged, and the chunk geometry is \
         unknown; formatting the region again discards the log"
    )]
    CorruptSuperblock,
    #[error("the superblock has format version {0}, this library reads version 1")]
    UnsupportedVersion(u32),
    #[error(
        "the log was formatted with {stored}-byte alignment but opened as RingBuf<_, _, \
         {expected}>; open it with alignment {stored}"
    )]
    AlignmentMismatch { stored: usize, expected: usize },
    #[error(
        "the superblock describes {chunk_count} chunks of {chunk_size} bytes, which a region \
         of {len} bytes cannot hold; was the region truncated or mapped too short?"
    )]
    GeometryExceedsRegion {
        chunk_size: usize,
        chunk_count: usize,
        len: usize,
    },
    #[error(
        "the entry header at chunk {chunk}, offset {offset} is damaged (its checksum fails \
         where no crash leaves a torn header); the entries after it in the chunk are skipped"
    )]
    DamagedHeader { chunk: usize, offset: usize },
}

/// An append failed; nothing was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    #[error("a {len}-byte body does not fit a chunk (at most {max} bytes); use larger chunks")]
    TooLarge { len: usize, max: usize },
    #[error(
        "the log is full: none of its {chunk_count} chunks is free; release entries that are \
         no longer needed with RingBuf::release"
    )]
    LogFull { chunk_count: usize },
}

/// Recovery found an entry that cannot be trusted. A crash of a correct writer never
/// leaves one: the header is written only after its body and the zeroed slot after it are
/// durable, into a slot that was zero. So this is media corruption or a writer bug,
/// reported instead of a panic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorruptEntry {
    #[error(
        "entry {id} (chunk {chunk}, offset {offset}): the body's checksum is {computed:#010x}, \
         the header says {stored:#010x}; the body is damaged"
    )]
    BodyChecksum {
        id: u64,
        chunk: usize,
        offset: usize,
        stored: u32,
        computed: u32,
    },
    #[error(
        "entry {id} (chunk {chunk}, offset {offset}): a {len}-byte body would run past the \
         end of the chunk; the rest of the chunk is skipped"
    )]
    LengthOutOfChunk {
        id: u64,
        chunk: usize,
        offset: usize,
        len: usize,
    },
    #[error(
        "the entry header at chunk {chunk}, offset {offset} is damaged (its checksum fails \
         where no crash leaves a torn header); the entries after it in the chunk are skipped"
    )]
    DamagedHeader { chunk: usize, offset: usize },
}

impl CorruptEntry {
    /// The id the entry's header carries, if it can be read.
    pub fn id(&self) -> Option<u64> {
        match *self {
            CorruptEntry::BodyChecksum { id, .. } | CorruptEntry::LengthOutOfChunk { id, .. } => {
                Some(id)
            }
            CorruptEntry::DamagedHeader { .. } => None,
        }
    }
}
