//! Reading a log back: walking the headers of a chunk, and merging every chunk's entries
//! into one stream in id order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::CorruptEntry;
use crate::layout::{entry_len, Header, HeaderSlot, HEADER_LEN, HEADER_SPACE};

/// A header found in a chunk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    /// None: a damaged header, the chunk's last.
    pub header: Option<Header>,
    /// Offset of the header in the chunk.
    pub offset: usize,
    /// The body lies within the chunk.
    pub fits: bool,
    /// The id of the chunk's entry before it (0 for the first): where a damaged header
    /// goes in the id order.
    pub after: u64,
}

/// Walks a chunk's headers from its start until a zero or torn header, a damaged header,
/// the end of the chunk, or a header whose body would run past the end.
pub(crate) struct ChunkCursor<'a> {
    chunk: &'a [u8],
    offset: usize,
    align: usize,
    last_id: u64,
}

impl<'a> ChunkCursor<'a> {
    /// `chunk.len()` is a multiple of `align`, which is at least a header line.
    pub fn new(chunk: &'a [u8], align: usize) -> Self {
        ChunkCursor {
            chunk,
            offset: 0,
            align,
            last_id: 0,
        }
    }

    /// Whether a header slot that is not valid was damaged rather than torn by a crash.
    fn damaged(&self, slot: HeaderSlot, offset: usize) -> bool {
        match slot {
            HeaderSlot::Damaged => true,
            // A torn header's length word, if written, is its own: the slot after its
            // entry was made zero before any of the header could persist. Not so for a
            // chunk's first header that a release cut short, the released entries after
            // it; but a release zeroes the checksum word before the others, so such a
            // header has its checksum word zero.
            HeaderSlot::Torn {
                body_len: Some(len),
                checksum_written,
            } if offset > 0 || checksum_written => {
                let next = offset.saturating_add(entry_len(len as usize, self.align));
                let slot = self.chunk.get(next..next + HEADER_LEN);
                slot.is_some_and(|bytes| bytes.iter().any(|&b| b != 0))
            }
            _ => false,
        }
    }
}

impl Iterator for ChunkCursor<'_> {
    type Item = Found;

    fn next(&mut self) -> Option<Found> {
        let offset = self.offset;
        let bytes = self.chunk.get(offset..offset + HEADER_LEN)?;
        self.offset = self.chunk.len();
        let after = self.last_id;
        let header = match Header::decode(bytes.try_into().ok()?) {
            HeaderSlot::Valid(header) => header,
            slot if self.damaged(slot, offset) => {
                return Some(Found {
                    header: None,
                    offset,
                    fits: false,
                    after,
                })
            }
            _ => return None,
        };
        let room = self.chunk.len() - offset - HEADER_SPACE;
        let fits = header.body_len as usize <= room;
        if fits {
            self.offset = offset + entry_len(header.body_len as usize, self.align);
        }
        self.last_id = header.id;
        Some(Found {
            header: Some(header),
            offset,
            fits,
            after,
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
/// Within a chunk ids ascend, so this is a merge of the chunks' streams. A damaged entry
/// is yielded as an error, and the merge goes on; a damaged header (its chunk's last item)
/// comes after the chunk's entry before it.
pub struct Recovery<'a> {
    chunks: Vec<&'a [u8]>,
    cursors: Vec<ChunkCursor<'a>>,
    /// The next header of each chunk that has one.
    pending: Vec<Option<Found>>,
    /// (id, damaged, chunk) of every pending header, smallest id on top.
    order: BinaryHeap<Reverse<(u64, bool, usize)>>,
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
            let id = found.header.map_or(found.after, |header| header.id);
            self.order
                .push(Reverse((id, found.header.is_none(), chunk)));
        }
    }
}

impl<'a> Iterator for Recovery<'a> {
    type Item = Result<RecoveredEntry<'a>, CorruptEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        let Reverse((_, _, chunk)) = self.order.pop()?;
        let found = self.pending[chunk].take()?;
        self.advance(chunk);
        let Found {
            header,
            offset,
            fits,
            ..
        } = found;
        let Some(header) = header else {
            return Some(Err(CorruptEntry::DamagedHeader { chunk, offset }));
        };
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
