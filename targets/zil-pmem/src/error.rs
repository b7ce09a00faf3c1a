//! What can go wrong, as typed errors whose messages say what to do.

use persim_ringbuf::MAX_COMMITTERS;

use crate::layout::{Position, FORMAT_VERSION, HEADER_SIZE, SUPERBLOCK_SPACE};

/// Formatting or opening a region failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("{count} committers requested; the log has 1..={MAX_COMMITTERS}")]
    BadCommitterCount { count: usize },
    #[error(
        "chunk size {chunk_size} is not a multiple of {HEADER_SIZE} bytes of at least two \
         headers; pick another chunk size"
    )]
    BadChunkSize { chunk_size: usize },
    #[error(
        "a region of {len} bytes at {addr:#x} has no room for a {chunk_size}-byte chunk \
         after the {SUPERBLOCK_SPACE}-byte superblock, or is not 64-byte aligned; use a \
         larger, page-aligned region or smaller chunks"
    )]
    RegionTooSmall {
        len: usize,
        addr: usize,
        chunk_size: usize,
    },
    #[error("the region holds no ZIL-PMEM log (no superblock); format it first")]
    NotFormatted,
    #[error(
        "the superblock's checksum does not match: the geometry is unknown; formatting the \
         region again discards the log"
    )]
    CorruptSuperblock,
    #[error(
        "the region was formatted by format version {version} with {header_size}-byte entry \
         headers; this library reads version {FORMAT_VERSION} with {HEADER_SIZE}-byte \
         headers: open it with the library that wrote it, or format it again (discarding \
         the log)"
    )]
    OtherVersion { version: u32, header_size: usize },
    #[error(
        "the superblock describes {chunk_count} chunks of {chunk_size} bytes, more than the \
         {len}-byte region holds: this is not the region (or namespace size) the log was \
         formatted on"
    )]
    OtherGeometry {
        chunk_size: usize,
        chunk_count: usize,
        len: usize,
    },
}

/// An append failed; nothing was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    #[error(
        "no free chunk: sync a txg (txg_synced) to free the chunks of synced entries, or \
         commit this write with the txg instead of logging it"
    )]
    LogFull,
    #[error(
        "a {body_len}-byte body does not fit a {chunk_size}-byte chunk with its header; \
         commit it with the txg instead of logging it"
    )]
    TooLarge { body_len: usize, chunk_size: usize },
    #[error("the log is not claimed and replayed yet: call claim and replay after open")]
    NotReady,
    #[error("object-set ids and txgs start at 1")]
    ZeroField,
}

/// Claim refused to take the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("the log was already claimed since it was opened")]
    AlreadyClaimed,
}

/// A claimed entry that replay will not apply, and everything after it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayStop {
    #[error(
        "entry {entry:?} depends on {expected} entries of generation {gen} in txg {txg}, \
         and the log holds {found}: an entry it depends on is missing; replay stopped \
         before it (the entries before it are applied)"
    )]
    MissingDependency {
        entry: Position,
        gen: u64,
        txg: u64,
        expected: u64,
        found: u64,
    },
    #[error(
        "the body of entry {entry:?} (chunk {chunk}, offset {offset}) does not match its \
         checksum: the PM media or a stray write damaged it; replay stopped before it"
    )]
    BodyChecksum {
        entry: Position,
        chunk: usize,
        offset: usize,
    },
    #[error(
        "the entry header at chunk {chunk}, offset {offset} has bytes a crash cannot leave: \
         the PM media or a stray write damaged it, and the entry it held may come anywhere \
         in replay order; replay applied nothing"
    )]
    DamagedHeader { chunk: usize, offset: usize },
}

/// Replay stopped: at an entry it must not apply, or because the consumer failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError<E> {
    #[error(transparent)]
    Stopped(ReplayStop),
    #[error("the consumer failed to apply entry {entry:?}: {error}")]
    Consumer { entry: Position, error: E },
}
