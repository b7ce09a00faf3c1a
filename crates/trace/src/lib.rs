//! Persim traces: the entries a traced run records, the human-readable text form
//! (docs/trace-format.md) and the compact, compressed binary form (docs/trace-format.md).
//!
//! [`Reader`] reads either form, chosen by content (on a thread of its own:
//! [`Reader::read_ahead`]); [`TextWriter`], [`BinaryWriter`] and
//! [`BackgroundWriter`] write them.

pub mod atomic_file;
mod background;
mod binary;
mod entry;
mod error;
mod read_ahead;
mod reader;
mod symbols;
pub mod synthetic;
mod text;

pub use background::BackgroundWriter;
pub use binary::{write_binary_file, BinaryWriter};
pub use entry::{
    Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op, BLOCK_SIZE, MAX_BLK_WRITE_LEN,
    MAX_STACK_DEPTH, MAX_WRITE_LEN,
};
pub use error::{TraceError, TraceErrorKind};
pub use read_ahead::ReadAhead;
pub use reader::{read_all, Format, Reader};
pub use symbols::{symbols_path, Location, Symbols};
pub use text::{ParseEntryError, TextWriter};

/// Where the PM contents at the start of a recorded trace are kept, next to the trace:
/// crash images are built on top of them.
pub fn initial_image_path(trace: &std::path::Path) -> std::path::PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".initial");
    name.into()
}

/// Where the block device's contents at the start of a recorded trace are kept (traces
/// with `blk-size`), next to the trace.
pub fn initial_block_image_path(trace: &std::path::Path) -> std::path::PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".blk-initial");
    name.into()
}

/// Removes a recorded trace and everything a recording leaves beside it: its initial
/// images and the temporary files of writers that never finished (a guest killed on a hang
/// or panic). Best effort: what cannot be removed stays.
pub fn remove_recording(trace: &std::path::Path) {
    let _ = std::fs::remove_file(trace);
    let _ = std::fs::remove_file(symbols_path(trace));
    atomic_file::remove_temporaries(trace);
    for initial in [initial_image_path(trace), initial_block_image_path(trace)] {
        let _ = std::fs::remove_file(&initial);
        atomic_file::remove_temporaries(&initial);
    }
}
