//! Reads a text trace line by line, in constant memory per line.

use std::io::{BufRead, Read};

use crate::entry::{Entry, Header, MAX_BLK_WRITE_LEN};
use crate::error::{TraceError, TraceErrorKind};
use crate::text::header::parse_header_line;

/// The longest line a valid trace can hold (the largest block write in hex, with room for
/// the offset and metadata). Longer lines are rejected before they are buffered whole.
const MAX_LINE_LEN: u64 = 2 * MAX_BLK_WRITE_LEN as u64 + 64 * 1024;
/// How much of an offending line an error message quotes.
const QUOTE_LEN: usize = 120;

pub(crate) struct TextReader {
    input: Box<dyn BufRead + Send>,
    header: Header,
    /// Number of the last line read, counting from 1.
    line_no: u64,
    /// Index of the next entry.
    index: u64,
    /// The first entry line, read while looking for the header line.
    pending: Option<String>,
    buf: Vec<u8>,
}

impl TextReader {
    /// Reads the comments and blank lines before the first entry, taking the header from a
    /// `# persim-trace` line among them.
    pub(crate) fn new(input: Box<dyn BufRead + Send>) -> Result<Self, TraceError> {
        let mut reader = TextReader {
            input,
            header: Header::default(),
            line_no: 0,
            index: 0,
            pending: None,
            buf: Vec::new(),
        };
        while let Some(line) = reader.next_line()? {
            if let Some(header) = parse_header_line(&line) {
                reader.header = header.map_err(|problem| reader.error(&line, problem))?;
            } else if !is_blank_or_comment(&line) {
                reader.pending = Some(line);
                break;
            }
        }
        Ok(reader)
    }

    pub(crate) fn header(&self) -> Header {
        self.header
    }

    fn next_line(&mut self) -> Result<Option<String>, TraceError> {
        self.buf.clear();
        let n = (&mut self.input)
            .take(MAX_LINE_LEN + 1)
            .read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        if self.buf.len() as u64 > MAX_LINE_LEN {
            let start = String::from_utf8_lossy(&self.buf[..QUOTE_LEN]).into_owned();
            return Err(self.error(&start, format!("line is longer than {MAX_LINE_LEN} bytes")));
        }
        let line = match std::str::from_utf8(&self.buf) {
            Ok(line) => line.trim_end_matches(['\n', '\r']).to_owned(),
            Err(_) => {
                let lossy = String::from_utf8_lossy(&self.buf).into_owned();
                return Err(self.error(&lossy, "line is not UTF-8 text".to_owned()));
            }
        };
        Ok(Some(line))
    }

    fn next_entry(&mut self) -> Result<Option<Entry>, TraceError> {
        let line = match self.pending.take() {
            Some(line) => line,
            None => loop {
                match self.next_line()? {
                    None => return Ok(None),
                    Some(line) if is_blank_or_comment(&line) => continue,
                    Some(line) => break line,
                }
            },
        };
        let entry = line
            .parse::<Entry>()
            .map_err(|e| self.error(&line, e.to_string()))?;
        self.index += 1;
        Ok(Some(entry))
    }

    fn error(&self, text: &str, problem: String) -> TraceError {
        let mut quoted: String = text.trim_end().chars().take(QUOTE_LEN).collect();
        if quoted.len() < text.trim_end().len() {
            quoted.push_str("...");
        }
        TraceError::new(TraceErrorKind::Text {
            line: self.line_no,
            index: self.index,
            text: quoted,
            problem,
        })
    }
}

fn is_blank_or_comment(line: &str) -> bool {
    let line = line.trim_start();
    line.is_empty() || line.starts_with('#')
}

impl Iterator for TextReader {
    type Item = Result<Entry, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}
