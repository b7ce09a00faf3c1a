//! The human-readable text form of a trace (docs/reference/trace-format.md).

mod header;
mod line;
mod reader;
mod writer;

pub use line::ParseEntryError;
pub(crate) use reader::TextReader;
pub use writer::TextWriter;
