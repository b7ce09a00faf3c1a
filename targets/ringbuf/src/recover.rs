//! Reading a log back: walking the headers of a chunk, and merging every chunk's entries
//! into one stream in id order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::CorruptEntry;
use crate::layout::{entry_len, Header, HeaderSlot, HEADER_LEN, HEADER_SPACE};

/// A header found in a chunk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub header: Header,
    /// Offset of the header in the chunk.
    pub offset: usize,
    /// The body lies within the chunk.
    pub fits: bool,
}

/// Walks a chunk's headers from its start until a zero or invalid header, the end of the
/// chunk, or a header whose body would run past the end.
pub(crate) struct ChunkCursor<'a> {
    chunk: &'a [u8],
    offset: usize,
    align: usize,
}

impl<'a> ChunkCursor<'a> {
    /// `chunk.len()` is a multiple of `align`, which is at least a header line.
    pub fn new(chunk: &'a [u8], align: usize) -> Self {
        ChunkCursor {
            chunk,
            offset: 0,
            align,
        }
    }
}

impl Iterator for ChunkCursor<'_> {
    type Item = Found;

    fn next(&mut self) -> Option<Found> {
        let offset = self.offset;
        let bytes = self.chunk.get(offset..offset + HEADER_LEN)?;
        self.offset = self.chunk.len();
        let HeaderSlot::Valid(header) = Header::decode(bytes.try_into().ok()?) else {
            return None;
        };
        let room = self.chunk.len() - offset - HEADER_SPACE;
        let fits = header.body_len as usize <= room;
        if fits {
            self.offset = offset + entry_len(header.body_len as usize, self.align);
        }
        Some(Found {
            header,
            offset,
            fits,
        })
    }
}

/// An entry read back from the log. The body borrows the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveredEntry<'a> {
    pub id: u64,
    pub body: &'a [u8],
}

/// Every entry of a log in ascending id order, as returned by [`crate::RingBuf::recover`].
///
/// Within a chunk ids ascend, so this is a merge of the chunks' streams. An entry whose
/// header is intact but which is damaged is yielded as an error, and the merge goes on.
pub struct Recovery<'a> {
    chunks: Vec<&'a [u8]>,
    cursors: Vec<ChunkCursor<'a>>,
    /// The next header of each chunk that has one.
    pending: Vec<Option<Found>>,
    /// (id, chunk) of every pending header, smallest id on top.
    order: BinaryHeap<Reverse<(u64, usize)>>,
}

impl<'a> Recovery<'a> {
    pub(crate) fn new(chunks: Vec<&'a [u8]>, align: usize) -> Self {
        let mut recovery = Recovery {
            cursors: chunks
                .iter()
                .map(|chunk| ChunkCursor::new(chunk, align))
                .collect(),
            pending: vec![None; chunks.len()],
            order: BinaryHeap::with_capacity(chunks.len()),
            chunks,
        };
        (0..recovery.chunks.len()).for_each(|chunk| recovery.advance(chunk));
        recovery
    }

    fn advance(&mut self, chunk: usize) {
        self.pending[chunk] = self.cursors[chunk].next();
        if let Some(found) = self.pending[chunk] {
            self.order.push(Reverse((found.header.id, chunk)));
        }
    }
}

impl<'a> Iterator for Recovery<'a> {
    type Item = Result<RecoveredEntry<'a>, CorruptEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        let Reverse((_, chunk)) = self.order.pop()?;
        let found = self.pending[chunk].take()?;
        self.advance(chunk);
        let Found {
            header,
            offset,
            fits,
        } = found;
        let len = header.body_len as usize;
        if !fits {
            return Some(Err(CorruptEntry::LengthOutOfChunk {
                id: header.id,
                chunk,
                offset,
                len,
            }));
        }
        let start = offset + HEADER_SPACE;
        let body = &self.chunks[chunk][start..start + len];
        let computed = crc32c::crc32c(body);
        let unchecked = cfg!(feature = "mutant-no-body-check");
        Some(if unchecked || computed == header.body_crc {
            Ok(RecoveredEntry {
                id: header.id,
                body,
            })
        } else {
            Err(CorruptEntry::BodyChecksum {
                id: header.id,
                chunk,
                offset,
                stored: header.body_crc,
                computed,
            })
        })
    }
}
