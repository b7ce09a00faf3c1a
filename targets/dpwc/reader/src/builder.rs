//! Builds PM images by the layout, as the module's `format`, generation changes and appends
//! leave them, for tests: of this reader, and of anything that wants a crafted cache (a
//! stale entry, a torn one, a counter beyond the last entry).

use crate::entry::{header_crc, Header, FLAG_DISCARD, HEADER_LEN};
use crate::superblock::{Superblock, SUPERBLOCK_LEN};
use crate::word::{seal, unseal, GEN_WORD_BYTES, USED_WORD_BYTES};

/// What an entry asks of the origin.
#[derive(Clone, Copy, Debug)]
pub enum Op<'d> {
    /// Write `data` (a multiple of 512 bytes) from `sector` on.
    Write { sector: u64, data: &'d [u8] },
    /// Discard `len` bytes from `sector` on.
    Discard { sector: u64, len: u32 },
}

/// A PM image under construction; every write lands at once (there is no crash here: a
/// test crafts the crash state it wants with [`Self::write_entry`] and [`Self::set_used`]).
pub struct ImageBuilder {
    superblock: Superblock,
    image: Vec<u8>,
}

impl ImageBuilder {
    /// A zeroed device of `superblock.image_len()` bytes with `superblock` written: what
    /// the table option `format` leaves (every generation free, every counter 0).
    pub fn format(superblock: Superblock) -> Self {
        let mut image = vec![0; superblock.image_len() as usize];
        image[..SUPERBLOCK_LEN].copy_from_slice(&superblock.encode());
        Self { superblock, image }
    }

    pub fn superblock(&self) -> &Superblock {
        &self.superblock
    }

    /// Opens table slot `generation` under id `gen_id` as the protocol does: every counter
    /// 0, then the id.
    pub fn open_generation(&mut self, generation: u32, gen_id: u64) {
        for chunk in 0..self.superblock.chunks_per_gen {
            self.set_used(generation, chunk, 0);
        }
        self.set_gen_id(generation, gen_id);
    }

    /// Sets a generation's id (its word: with its CRC) without touching its counters: a reuse without the reset
    /// (the mutant the layout names), or freeing with id 0.
    pub fn set_gen_id(&mut self, generation: u32, gen_id: u64) {
        let word = seal(gen_id, GEN_WORD_BYTES);
        self.put_u64(self.superblock.gen_id_offset(generation), word);
    }

    pub fn used(&self, generation: u32, chunk: u32) -> u64 {
        let at = self.superblock.used_offset(generation, chunk) as usize;
        let word = u64::from_le_bytes(self.image[at..at + 8].try_into().unwrap());
        unseal(word, USED_WORD_BYTES).expect("a used counter the builder wrote")
    }

    /// Sets a chunk's `used` (its word: with its CRC).
    pub fn set_used(&mut self, generation: u32, chunk: u32, used: u64) {
        let word = seal(used, USED_WORD_BYTES);
        self.put_u64(self.superblock.used_offset(generation, chunk), word);
    }

    /// Appends an entry at the chunk's `used` and advances `used` past it, as a completed
    /// write does; returns its offset in the chunk, or `None` if it does not fit.
    pub fn append(&mut self, generation: u32, chunk: u32, id: u64, op: Op) -> Option<u64> {
        let offset = self.used(generation, chunk);
        let header = header_of(id, op);
        if offset + header.entry_len() > u64::from(self.superblock.chunk_size) {
            return None;
        }
        let len = self.write_entry(generation, chunk, offset, id, op);
        self.set_used(generation, chunk, offset + len);
        Some(offset)
    }

    /// Writes an entry (header with its CRCs, then data) at `offset` of the chunk without
    /// touching `used`; returns the bytes it occupies.
    pub fn write_entry(
        &mut self,
        generation: u32,
        chunk: u32,
        offset: u64,
        id: u64,
        op: Op,
    ) -> u64 {
        let mut header = header_of(id, op);
        let data = match op {
            Op::Write { data, .. } => data,
            Op::Discard { .. } => &[],
        };
        header.data_crc = crc32c::crc32c(data);
        header.hdr_crc = header_crc(&header.encode());
        let start = (self.superblock.chunk_offset(generation, chunk) + offset) as usize;
        self.image[start..start + HEADER_LEN].copy_from_slice(&header.encode());
        self.image[start + HEADER_LEN..start + HEADER_LEN + data.len()].copy_from_slice(data);
        header.entry_len()
    }

    /// The image, to damage bytes of it in place.
    pub fn image_mut(&mut self) -> &mut [u8] {
        &mut self.image
    }

    pub fn into_image(self) -> Vec<u8> {
        self.image
    }

    fn put_u64(&mut self, offset: u64, value: u64) {
        let at = offset as usize;
        self.image[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }
}

fn header_of(id: u64, op: Op) -> Header {
    let (flags, sector, len) = match op {
        Op::Write { sector, data } => (0, sector, data.len() as u32),
        Op::Discard { sector, len } => (FLAG_DISCARD, sector, len),
    };
    Header {
        flags,
        id,
        sector,
        len,
        data_crc: 0,
        hdr_crc: 0,
    }
}
