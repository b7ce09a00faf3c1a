//! A crash-consistent, checksummed, concurrency-limited log on persistent memory: the ring
//! buffer that ZIL-PMEM and DPWC use as their PM log, as a library.
//!
//! - A region (a DAX mapping, an ordinary file, or a heap buffer) is divided into equal
//!   chunks; the geometry lives in a superblock, so recovery never depends on how the
//!   opening program is configured.
//! - Each entry is a header (id, body length, CRC32C of the body, CRC32C of the header) on a
//!   cache line of its own, then the body, padded so that every header starts at `ALIGN`.
//! - An append takes one of a limited number of committers, each filling a chunk of its
//!   own, and writes: (1) zeros over the next header, (2) the body, fence, (3) the header,
//!   fence. It returns when the entry is durable.
//! - Recovery walks every chunk until a zero or invalid header and reports a body whose
//!   checksum does not match as an error item, never a panic.
//! - Releasing a full chunk zeroes its first header and makes it free again.
//!
//! How stores reach PM is a [`PmAccess`] type parameter: non-temporal stores, cached stores
//! with flushes, or eADR stores, chosen by CPU features with [`dispatch`]; with the `trace`
//! feature (on by default), [`Tracing`] records the Persim trace of the same writes.
//!
//! ```
//! use persim_ringbuf::{Eadr, HeapRegion, RingBuf};
//!
//! let mut log = RingBuf::<_, _>::format(HeapRegion::new(1 << 20), Eadr, 64 << 10, 2)?;
//! let id = log.append(b"hello")?;
//! let entries: Vec<_> = log.recover().collect::<Result<_, _>>()?;
//! assert_eq!((entries[0].id, entries[0].body), (id, &b"hello"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod access;
mod committers;
mod error;
mod layout;
mod recover;
mod region;
mod ringbuf;

pub use access::{dispatch, AccessKind, AccessVisitor, Eadr, PmAccess, Strategy, Unsupported};
#[cfg(target_arch = "x86_64")]
pub use access::{Clflush, Clflushopt, Clwb, NtAvx2, NtAvx512, NtSse2};
#[cfg(feature = "trace")]
pub use access::{TraceStyle, Tracing};
pub use committers::{Committer, Committers, MAX_COMMITTERS};
pub use error::{AppendError, CorruptEntry, OpenError};
pub use layout::{Geometry, HEADER_SPACE, LINE, SUPERBLOCK_SPACE};
pub use recover::{RecoveredEntry, Recovery};
pub use region::{HeapRegion, MappedRegion, Region};
pub use ringbuf::RingBuf;
