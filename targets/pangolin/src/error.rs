//! What can go wrong, as typed errors whose messages say what to do.

use crate::layout::Geometry;

/// Formatting or opening a pool failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error(
        "bad geometry {0:?}: the chunk size must be a non-zero multiple of 4096, a zone needs \
         at least 2 rows, the log size a multiple of 4096 up to 16 MiB, and the pool at most 1 TiB"
    )]
    BadGeometry(Geometry),
    #[error("a pool of {len} bytes has no room for one zone of {0:?}; use a larger pool or smaller chunks", len = .0.pool_len)]
    TooSmall(Geometry),
    #[error("the region's length differs from the pool length its metadata records ({0} bytes); open the whole pool")]
    WrongLength(u64),
    #[error("a root object of {0} bytes does not fit a zone; use a smaller root")]
    RootTooLarge(u64),
    #[error("the region holds no Pangolin pool (no metadata); format it first")]
    NotFormatted,
    #[error("both copies of the pool metadata fail their checksum; the pool cannot be opened")]
    CorruptMetadata,
    #[error("the pool has format version {0}; this library reads version 1: open it with the library that wrote it")]
    OtherVersion(u32),
    #[error(
        "a committed transaction's redo log is damaged in both copies: the pool may hold a \
         half-applied transaction; restore it from a backup"
    )]
    LogLost,
    #[error(
        "the allocation bitmap of the zone at {0:#x} fails its checksum and parity cannot \
         rebuild it; the pool cannot be opened"
    )]
    LostBitmap(u64),
}

/// A transaction failed; it was aborted and PM is as before it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    #[error(
        "{0:#x} is not an allocated object of this pool; pass an object id that alloc returned"
    )]
    BadObject(u64),
    #[error("range {offset}+{len} is outside object {oid:#x} of {size} bytes")]
    OutOfObject {
        oid: u64,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error(
        "type number {} is reserved for the allocation bitmaps; use another",
        u32::MAX
    )]
    ReservedType,
    #[error("no zone has {0} contiguous free bytes; free objects or use a larger pool")]
    OutOfSpace(u64),
    #[error("the transaction's {0} bytes of redo log exceed the log; commit smaller transactions or format with a larger log")]
    LogFull(u64),
    #[error(
        "object {0:#x} fails its checksum and parity cannot rebuild it (two damaged pages in \
         one page column?): its data is lost"
    )]
    Unrepairable(u64),
    #[error(
        "the micro-buffer of object {0:#x} was overwritten around its data (its canary \
         changed): a buffer overflow in the program; the transaction was aborted"
    )]
    Canary(u64),
}
