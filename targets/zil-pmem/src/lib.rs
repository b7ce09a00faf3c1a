//! ZIL-PMEM's log engine: an intent log written directly to persistent memory, as the
//! ZIL-PMEM design proposed for OpenZFS, as a library a storage system can embed
//! (docs/design/zil-pmem.md).
//!
//! - A PM region is carved into chunks; each of up to 64 committers
//!   ([`DEFAULT_COMMITTERS`] by default) writes entries into a chunk of its own; full
//!   chunks wait, bucketed by their highest txg, until the consumer has committed that
//!   txg ([`ZilPmem::txg_synced`]), which zeroes their first header and frees them.
//! - Each entry is a 256-byte self-describing header (object set, GUIDs, txg, generation
//!   and id, length, checksums of body and header, and a dependency record) and its body.
//!   The write path zeroes the next header and writes the body, drains, writes the header
//!   and drains.
//! - After a crash, [`ZilPmem::claim`] finds the live entries and checks that every entry's
//!   dependencies are present; [`ZilPmem::replay`] applies them in (generation, id) order,
//!   verifies each body's checksum, and records its progress in the consumer's
//!   [`LogHeader`] so that a crash during replay resumes without applying an entry twice.
//!
//! How stores reach PM is persim-ringbuf's [`PmAccess`]; with the `trace` feature, its
//! `Tracing` access records the Persim trace of the same writes.
//!
//! ```
//! use persim_ringbuf::{Eadr, HeapRegion};
//! use persim_zil_pmem::{LogHeader, ZilPmem, DEFAULT_COMMITTERS};
//!
//! let region = HeapRegion::new(1 << 20);
//! let mut log = ZilPmem::format(region, Eadr, 64 << 10, DEFAULT_COMMITTERS)?;
//! let header = LogHeader::new(0x9001, 0x7002);
//! let claim = log.claim(&header, 1)?;
//! let header = log.replay(&claim, |_, _| Ok::<(), ()>(())).expect("nothing to replay");
//! log.append(1, 1, b"a synchronous write", true)?;
//! # let _ = header;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod claim;
mod error;
mod header;
pub mod kv;
mod layout;
mod log;
pub mod openzfs;

pub use claim::{Claim, ClaimedEntry, Entry};
pub use error::{AppendError, ClaimError, OpenError, ReplayError, ReplayStop};
pub use header::{LogHeader, LogState, LOG_HEADER_LEN};
pub use layout::{
    entry_len, Dependency, EntryHeader, Geometry, Position, DEP_TXGS, FORMAT_VERSION, HEADER_SIZE,
    SUPERBLOCK_SPACE,
};
pub use log::{ZilPmem, DEFAULT_COMMITTERS};
pub use persim_ringbuf::{PmAccess, Region};
