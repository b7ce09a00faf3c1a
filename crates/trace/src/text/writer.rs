//! Writes a text trace: the header line, then one entry per line.

use std::io::{self, BufWriter, Write};

use crate::entry::{Entry, Header};
use crate::text::header::format_header_line;

pub struct TextWriter<W: Write> {
    out: BufWriter<W>,
}

impl<W: Write> TextWriter<W> {
    /// Writes the header line.
    pub fn new(w: W, header: &Header) -> io::Result<Self> {
        let mut out = BufWriter::new(w);
        writeln!(out, "{}", format_header_line(header))?;
        Ok(TextWriter { out })
    }

    /// Writes one entry; an entry that the text form cannot hold (e.g. an empty write) is an
    /// `InvalidInput` error, so that every written trace reads back.
    pub fn write(&mut self, entry: &Entry) -> io::Result<()> {
        entry
            .validate()
            .map_err(|problem| io::Error::new(io::ErrorKind::InvalidInput, problem))?;
        writeln!(self.out, "{entry}")
    }

    /// Writes one entry followed by `# comment` (which readers ignore).
    pub fn write_with_comment(&mut self, entry: &Entry, comment: &str) -> io::Result<()> {
        entry
            .validate()
            .map_err(|problem| io::Error::new(io::ErrorKind::InvalidInput, problem))?;
        writeln!(self.out, "{entry}  # {comment}")
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }
}
