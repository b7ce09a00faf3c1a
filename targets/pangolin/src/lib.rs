//! Pangolin: fault-tolerant persistent-memory objects, after Zhang's dissertation (ch. 3),
//! with libpmemobj's programming model (docs/design/pangolin.md).
//!
//! - A pool holds its metadata twice (checksummed), a redo log twice, then zones: chunk
//!   rows whose last row is the XOR parity of the others (100 rows, 1 % parity, by
//!   default), so any single lost 4 KiB page, or a scribble up to a row long, is rebuilt.
//! - Objects carry a header (size, type, Adler32 checksum). A transaction works on
//!   micro-buffers, DRAM copies of the objects opened, verified (and repaired from parity)
//!   first and fenced by canaries; commit updates checksums incrementally, writes a
//!   replicated redo log, marks it committed, writes back and updates parity with the XOR
//!   of old and new bytes. Recovery replays a committed log and recomputes its parity.
//! - [`Pool::scrub`] verifies every object and parity page.
//!
//! Every PM write goes through persim-ringbuf's [`PmAccess`] (whole-line stores, fences),
//! so the crash model can trace it. Threads share a pool, each running its own
//! transactions (log lanes, a locked allocator, parity by atomic XOR or column lock); they
//! isolate the objects they change themselves, as with libpmemobj. The C ABI
//! (libpangolin, `capi/include/pangolin.h`) is the `capi` package inside this directory.
//!
//! ```
//! use persim_pangolin::{Geometry, Pool};
//! use persim_ringbuf::{Eadr, HeapRegion};
//!
//! let pool = Pool::format(HeapRegion::new(4 << 20), Eadr, Geometry::new(0), 64)?;
//! let root = pool.root();
//! let mut tx = pool.begin();
//! let node = tx.alloc(32, 1)?;
//! tx.add_range(root, 0, 8)?.copy_from_slice(&node.to_le_bytes());
//! tx.open(node)?[..5].copy_from_slice(b"hello");
//! tx.commit()?;
//! assert_eq!(&pool.get(node)?[..5], b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod alloc;
mod buffer;
mod checksum;
mod columns;
mod error;
mod lanes;
mod layout;
mod log;
mod parity;
mod pm;
mod pool;
mod repair;
mod tx;

pub use buffer::MicroBuffer;
pub use error::{OpenError, TxError};
pub use layout::{Geometry, FORMAT_VERSION, LINE, OBJ_HEADER, PAGE, UNIT};
pub use persim_ringbuf::{PmAccess, Region};
pub use pool::{Pool, ScrubReport};
pub use tx::{unit_bit, Tx, TxState};
