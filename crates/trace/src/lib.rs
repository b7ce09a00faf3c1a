//! Persim traces: the entries a traced run records, the human-readable text form
//! (docs/reference/trace-format.md) and the compact, compressed binary form (docs/reference/trace-format.md).
//!
//! [`Reader`] reads either form, chosen by content (on a thread of its own:
//! [`Reader::read_ahead`]); [`TextWriter`], [`BinaryWriter`] and
//! [`BackgroundWriter`] write them.

pub mod atomic_file;
mod background;
mod binary;
pub mod disk_space;
mod entry;
mod error;
mod read_ahead;
mod reader;
mod recording;
mod symbols;
pub mod synthetic;
mod text;

pub use background::BackgroundWriter;
pub use binary::{write_binary_file, BinaryWriter};
pub use entry::{
    Arg, Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op, Task, BLOCK_SIZE,
    MAX_BLK_WRITE_LEN, MAX_CALL_ARGS, MAX_CALL_NAME_LEN, MAX_COMM_LEN, MAX_STACK_DEPTH,
    MAX_WRITE_LEN,
};
pub use error::{TraceError, TraceErrorKind};
pub use read_ahead::ReadAhead;
pub use reader::{read_all, Format, Reader};
pub use recording::Recording;
pub use symbols::{Location, SourceLine, Symbols};
pub use text::{ParseEntryError, TextWriter};
