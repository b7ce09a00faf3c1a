//! The fixed, uncompressed header of a binary trace.

use std::io::{self, Read, Write};

use crate::entry::Header;
use crate::error::{TraceError, TraceErrorKind};

/// The first bytes of every binary trace. The high first byte cannot start a text trace,
/// and the newline exposes transfers that rewrite line endings.
pub(crate) const MAGIC: [u8; 8] = *b"\x89persim\n";
/// The format version this code writes and reads.
const VERSION: u32 = 1;
/// Bytes after the magic: version, then pm_base, pm_size, blk_size and flags.
const FIELDS_LEN: usize = 4 + 4 * 8;

pub(crate) fn write_header(w: &mut impl Write, header: &Header) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + FIELDS_LEN);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    for field in [
        header.pm_base,
        header.pm_size,
        header.blk_size,
        header.flags,
    ] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    w.write_all(&bytes)
}

/// Reads the header fields that follow the magic.
pub(crate) fn read_header_fields(r: &mut impl Read) -> Result<Header, TraceError> {
    let mut bytes = [0u8; FIELDS_LEN];
    r.read_exact(&mut bytes).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            header_error(format!(
                "the trace ends inside its {}-byte header",
                MAGIC.len() + FIELDS_LEN
            ))
        } else {
            e.into()
        }
    })?;
    let version = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(header_error(format!(
            "format version {version} is not supported (this persim reads version {VERSION}); \
             read it with the persim that wrote it"
        )));
    }
    let field = |i: usize| {
        let start = 4 + 8 * i;
        u64::from_le_bytes(bytes[start..start + 8].try_into().expect("8 bytes"))
    };
    Ok(Header {
        pm_base: field(0),
        pm_size: field(1),
        blk_size: field(2),
        flags: field(3),
    })
}

fn header_error(problem: String) -> TraceError {
    TraceError::new(TraceErrorKind::Header(problem))
}
