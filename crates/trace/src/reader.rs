//! Reading a trace of either form, chosen by its first bytes.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;

use crate::binary::{read_header_fields, BinaryReader, MAGIC};
use crate::entry::{Entry, Header};
use crate::error::TraceError;
use crate::text::TextReader;

const READ_BUF_LEN: usize = 256 * 1024;

/// The encoding of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
}

/// Reads the entries of a text or binary trace, one at a time, in constant memory.
/// Iteration ends after the first error.
pub struct Reader {
    decoder: Decoder,
    /// Prefixes error messages, e.g. the file name.
    name: Option<String>,
    failed: bool,
}

enum Decoder {
    Text(TextReader),
    Binary(BinaryReader),
}

impl Reader {
    /// Opens a trace file; errors name the file.
    pub fn open(path: &Path) -> Result<Reader, TraceError> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| TraceError::from(e).named(&name))?;
        let mut reader = Reader::new(file).map_err(|e| e.named(&name))?;
        reader.name = Some(name);
        Ok(reader)
    }

    /// Reads a trace from a stream, e.g. standard input.
    pub fn new(r: impl Read + Send + 'static) -> Result<Reader, TraceError> {
        let mut input = BufReader::with_capacity(READ_BUF_LEN, r);
        let mut prefix = Vec::with_capacity(MAGIC.len());
        (&mut input)
            .take(MAGIC.len() as u64)
            .read_to_end(&mut prefix)?;
        let decoder = if prefix == MAGIC {
            let header = read_header_fields(&mut input)?;
            Decoder::Binary(BinaryReader::new(Box::new(input), header)?)
        } else {
            let rest: Box<dyn BufRead + Send> =
                Box::new(BufReader::new(Cursor::new(prefix).chain(input)));
            Decoder::Text(TextReader::new(rest)?)
        };
        Ok(Reader {
            decoder,
            name: None,
            failed: false,
        })
    }

    /// The binary header, or for text the `# persim-trace` line (all zero without one).
    pub fn header(&self) -> Header {
        match &self.decoder {
            Decoder::Text(text) => text.header(),
            Decoder::Binary(binary) => binary.header(),
        }
    }

    pub fn format(&self) -> Format {
        match self.decoder {
            Decoder::Text(_) => Format::Text,
            Decoder::Binary(_) => Format::Binary,
        }
    }
}

impl Iterator for Reader {
    type Item = Result<Entry, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = match &mut self.decoder {
            Decoder::Text(text) => text.next(),
            Decoder::Binary(binary) => binary.next(),
        };
        Some(item?.map_err(|e| {
            self.failed = true;
            match &self.name {
                Some(name) => e.named(name),
                None => e,
            }
        }))
    }
}

/// Reads a whole trace into memory; for tests and small traces.
pub fn read_all(path: &Path) -> Result<(Header, Vec<Entry>), TraceError> {
    let reader = Reader::open(path)?;
    let header = reader.header();
    let entries = reader.collect::<Result<_, _>>()?;
    Ok((header, entries))
}
