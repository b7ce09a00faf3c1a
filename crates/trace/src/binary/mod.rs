//! The compact binary form of a trace: a fixed header, then one zstd frame holding the
//! entry stream. docs/reference/trace-format.md describes the layout byte by byte.

mod decode;
mod encode;
mod header;
mod tags;
mod varint;

pub(crate) use decode::BinaryReader;
pub use encode::{write_binary_file, BinaryWriter};
pub(crate) use header::{read_header_fields, MAGIC};
