//! The one error type of trace reading: it says which trace, which entry and where.

use std::fmt;
use std::io;

/// Reading a trace failed. Display names the trace (when read from a file), the entry index
/// and the position (line for text, byte offset of the decompressed entry stream for binary).
#[derive(Debug)]
pub struct TraceError {
    // Boxed so that `Result<Entry, TraceError>` stays small on the hot decoding path.
    inner: Box<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: Option<String>,
    kind: TraceErrorKind,
}

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum TraceErrorKind {
    /// The trace could not be read from its file or stream.
    Io(io::Error),
    /// The binary header is unusable (truncated, or from a newer format version).
    Header(String),
    /// A line of a text trace is not a valid entry. `line` counts from 1.
    Text {
        line: u64,
        index: u64,
        text: String,
        problem: String,
    },
    /// A binary entry could not be decoded. `offset` is the byte offset of the entry in the
    /// decompressed entry stream (the bytes after the zstd decompression of everything that
    /// follows the header).
    Corrupt {
        index: u64,
        offset: u64,
        problem: String,
    },
}

impl TraceError {
    pub(crate) fn new(kind: TraceErrorKind) -> Self {
        TraceError {
            inner: Box::new(Inner { name: None, kind }),
        }
    }

    /// Names the trace (usually its path) in the message.
    pub(crate) fn named(mut self, name: &str) -> Self {
        self.inner.name = Some(name.to_owned());
        self
    }

    pub fn kind(&self) -> &TraceErrorKind {
        &self.inner.kind
    }

    /// The index of the entry that could not be read, if the error concerns one entry.
    pub fn entry_index(&self) -> Option<u64> {
        match self.inner.kind {
            TraceErrorKind::Text { index, .. } | TraceErrorKind::Corrupt { index, .. } => {
                Some(index)
            }
            TraceErrorKind::Io(_) | TraceErrorKind::Header(_) => None,
        }
    }
}

impl From<io::Error> for TraceError {
    fn from(e: io::Error) -> Self {
        TraceError::new(TraceErrorKind::Io(e))
    }
}

// Written by hand, not with `thiserror`: the source is the I/O error inside the public
// `TraceErrorKind` behind the box, which a derive can only reach by adding a link to the
// chain (and `{:#}` would print the message twice more).
impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = &self.inner.name {
            write!(f, "{name}: ")?;
        }
        match &self.inner.kind {
            TraceErrorKind::Io(e) => write!(f, "cannot read the trace: {e}"),
            TraceErrorKind::Header(problem) => write!(f, "bad binary trace header: {problem}"),
            TraceErrorKind::Text {
                line,
                index,
                text,
                problem,
            } => write!(f, "line {line} (entry {index}): {problem}: `{text}`"),
            TraceErrorKind::Corrupt {
                index,
                offset,
                problem,
            } => write!(
                f,
                "corrupt entry {index} at byte {offset} of the entry stream: {problem}"
            ),
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.inner.kind {
            TraceErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}
