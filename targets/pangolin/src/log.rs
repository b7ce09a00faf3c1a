//! The redo log: two copies, each a header line (the commit mark) and a body of entries,
//! an entry being one word of pool offset (low 40 bits) and length (high 24), then the new
//! bytes, padded to 8: entries are sized to the bytes that changed, not to their lines.
//!
//! A commit writes the body to both copies, fences, writes the committed header to both,
//! and fences; once the new bytes and parity are in place it clears the mark. Recovery
//! trusts a committed header with a valid checksum in either copy, and replays the body of a
//! copy whose checksum matches the one in that header.

use persim_ringbuf::{PmAccess, Region};

use crate::checksum;
use crate::layout::{Geometry, LINE};
use crate::pm::{Line, Pm};

/// Copies of the log: a damaged or lost copy leaves the other.
pub const COPIES: usize = 2;
const MAGIC: u32 = u32::from_le_bytes(*b"PGLL");
const COMMITTED: u32 = 1;
const IDLE: u32 = 0;

/// New contents of pool ranges, in the order they were logged.
pub type Runs = Vec<(u64, Vec<u8>)>;

/// Bytes of a header line in use (the rest stays zero).
const HEADER: usize = 32;
/// Bytes of an entry's offset and length.
const ENTRY_HEADER: usize = 8;
/// Bits of an entry's pool offset (`Geometry::validate` bounds the pool); the length has
/// the rest, enough for a body of the largest log.
const OFFSET_BITS: u32 = 40;

/// A log body being built: entries appended in place, the body padded to whole lines.
#[derive(Default)]
pub struct Body {
    bytes: Vec<u8>,
    /// Where the open entry's header is, and the pool offset its bytes end at.
    open: Option<(usize, u64)>,
}

impl Body {
    /// An empty body in `memory` (a buffer of an earlier commit).
    pub fn reusing(mut memory: Vec<u8>) -> Self {
        memory.clear();
        Body {
            bytes: memory,
            open: None,
        }
    }

    /// Appends `bytes` for pool offset `at`, extending the open entry when they follow it.
    pub fn push(&mut self, at: u64, bytes: &[u8]) {
        match self.open {
            Some((_, end)) if end == at => {}
            _ => {
                self.close();
                self.open = Some((self.bytes.len(), at));
                self.bytes.extend_from_slice(&at.to_le_bytes());
            }
        }
        self.bytes.extend_from_slice(bytes);
        if let Some((_, end)) = &mut self.open {
            *end = at + bytes.len() as u64;
        }
    }

    /// The pool offset the open entry's bytes end at.
    pub fn end(&self) -> Option<u64> {
        self.open.map(|(_, end)| end)
    }

    fn close(&mut self) {
        if let Some((header, _)) = self.open.take() {
            let len = (self.bytes.len() - header - ENTRY_HEADER) as u64;
            let word = &mut self.bytes[header..header + ENTRY_HEADER];
            let at = u64::from_le_bytes(word.try_into().expect("8"));
            word.copy_from_slice(&(at | len << OFFSET_BITS).to_le_bytes());
            self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
        }
    }

    /// The body's bytes (empty if nothing was pushed).
    pub fn finish(mut self) -> Vec<u8> {
        self.close();
        self.bytes
    }
}

/// The log body of `runs`.
#[cfg(test)]
pub fn body(runs: &Runs) -> Vec<u8> {
    let mut body = Body::default();
    for (at, bytes) in runs {
        body.push(*at, bytes);
    }
    body.finish()
}

/// A header line: state and its checksum in the first word (so that clearing the mark is
/// one aligned 8-byte store), magic, the body's checksum, sequence number, body length.
fn header(state: u32, seq: u64, body: &[u8]) -> Line {
    let mut line = [0; LINE as usize];
    line[8..12].copy_from_slice(&MAGIC.to_le_bytes());
    line[12..16].copy_from_slice(&checksum::full(&[body]).to_le_bytes());
    line[16..24].copy_from_slice(&seq.to_le_bytes());
    line[24..32].copy_from_slice(&(body.len() as u64).to_le_bytes());
    set_state(&mut line, state);
    line
}

/// Bytes of the stream the header's checksum covers: the state and bytes 8..32.
const STATE_STREAM: u64 = 4 + HEADER as u64 - 8;

/// Sets the header's state and its checksum (over the state and bytes 8..32).
fn set_state(line: &mut Line, state: u32) {
    line[0..4].copy_from_slice(&state.to_le_bytes());
    let sum = checksum::full(&[&line[0..4], &line[8..HEADER]]);
    line[4..8].copy_from_slice(&sum.to_le_bytes());
}

/// Bytes a body may take in one copy.
pub fn capacity(geometry: &Geometry) -> u64 {
    geometry.log_size - LINE
}

/// Stores `body` in every copy (not yet durable, not yet committed): its whole lines,
/// then the bytes of its last line.
pub fn write<R: Region, A: PmAccess>(pm: &mut Pm<R, A>, geometry: &Geometry, body: &[u8]) {
    let whole = body.len() / LINE as usize * LINE as usize;
    for copy in 0..COPIES {
        let at = geometry.log_offset(copy) + LINE;
        pm.store(at, &body[..whole]);
        if whole < body.len() {
            pm.store_part(at + whole as u64, &body[whole..]);
        }
    }
}

/// Stores the commit mark of `body` in every copy; returns it, for [`clear`].
pub fn mark<R: Region, A: PmAccess>(
    pm: &mut Pm<R, A>,
    geometry: &Geometry,
    seq: u64,
    body: &[u8],
) -> Line {
    let line = header(COMMITTED, seq, body);
    for copy in 0..COPIES {
        pm.store_part(geometry.log_offset(copy), &line[..HEADER]);
    }
    line
}

/// Marks the transaction of commit mark `line` complete in every copy: its state and
/// checksum word only.
pub fn clear<R: Region, A: PmAccess>(pm: &mut Pm<R, A>, geometry: &Geometry, line: Line) {
    let line = idle(line);
    for copy in 0..COPIES {
        pm.store_part(geometry.log_offset(copy), &line[..8]);
    }
}

/// Commit mark `line` made idle: the states differ only in the first byte of the
/// header's checksummed stream, so its checksum is updated for that byte, not summed again.
fn idle(mut line: Line) -> Line {
    const _: () = assert!(COMMITTED >> 8 == IDLE >> 8, "states differ in byte 0 only");
    let sum = u32::from_le_bytes(line[4..8].try_into().expect("4"));
    let sum = checksum::update_byte(sum, STATE_STREAM, 0, COMMITTED as u8, IDLE as u8);
    line[0..4].copy_from_slice(&IDLE.to_le_bytes());
    line[4..8].copy_from_slice(&sum.to_le_bytes());
    line
}

/// Stores an idle header for sequence number `seq` in every copy (recovery is done).
pub fn reset<R: Region, A: PmAccess>(pm: &mut Pm<R, A>, geometry: &Geometry, seq: u64) {
    let line = header(IDLE, seq, &[]);
    for copy in 0..COPIES {
        pm.store_part(geometry.log_offset(copy), &line[..HEADER]);
    }
}

/// What the log holds after a restart.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// No committed transaction; the highest sequence number seen.
    Idle(u64),
    /// A committed transaction to replay, and its sequence number.
    Committed(Runs, u64),
    /// A committed header whose body is damaged in every copy.
    Lost,
}

pub fn find<R: Region, A: PmAccess>(pm: &Pm<R, A>, geometry: &Geometry) -> Found {
    let mut seq = 0;
    let mut marks = Vec::new();
    for copy in 0..COPIES {
        let at = geometry.log_offset(copy);
        let line = pm.line(at);
        let word = |i: usize| u32::from_le_bytes(line[i..i + 4].try_into().expect("4"));
        let long = |i: usize| u64::from_le_bytes(line[i..i + 8].try_into().expect("8"));
        if word(8) != MAGIC || checksum::full(&[&line[0..4], &line[8..HEADER]]) != word(4) {
            continue;
        }
        seq = seq.max(long(16));
        if word(0) == COMMITTED && long(24) <= capacity(geometry) {
            marks.push((long(16), long(24), word(12)));
        }
    }
    let Some(&(seq, len, sum)) = marks.iter().max() else {
        return Found::Idle(seq);
    };
    for copy in 0..COPIES {
        let body = pm.bytes(geometry.log_offset(copy) + LINE, len);
        if checksum::full(&[body]) == sum {
            return Found::Committed(parse(body), seq);
        }
    }
    Found::Lost
}

fn parse(mut body: &[u8]) -> Runs {
    let mut runs = Vec::new();
    while body.len() >= ENTRY_HEADER {
        let word = u64::from_le_bytes(body[..ENTRY_HEADER].try_into().expect("8"));
        let (at, len) = (
            word & ((1 << OFFSET_BITS) - 1),
            (word >> OFFSET_BITS) as usize,
        );
        // Padding (or a body whose checksum matched by chance) ends the entries.
        let Some(bytes) = body
            .get(ENTRY_HEADER..ENTRY_HEADER + len)
            .filter(|_| len > 0)
        else {
            break;
        };
        runs.push((at, bytes.to_vec()));
        body = &body[(ENTRY_HEADER + len).next_multiple_of(8).min(body.len())..];
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_parses_back_to_its_runs() {
        let last = (1 << OFFSET_BITS) - 8;
        let runs: Runs = vec![(64, vec![1; 13]), (4096, vec![2; 64]), (last, vec![3; 3])];
        let body = body(&runs);
        assert_eq!(body.len(), 24 + 72 + 16, "entries of 8 + 16, 8 + 64, 8 + 8");
        assert_eq!(parse(&body), runs);
    }

    #[test]
    fn a_cleared_mark_is_the_idle_header_of_its_transaction() {
        let body = body(&vec![(64, vec![5; 40])]);
        assert_eq!(idle(header(COMMITTED, 9, &body)), header(IDLE, 9, &body));
    }
}
