//! A whole PM image read as recovery reads it: the superblock, the generation table, the
//! valid entries of every live generation's chunks, and the order they replay in.

use crate::entry::{ChunkWalk, CorruptEntry, Entry};
use crate::nvdimm::pm_device;
use crate::replay::SectorMap;
use crate::superblock::{u64_at, Superblock, SuperblockError};
use crate::word::{unseal, GEN_WORD_BYTES, USED_WORD_BYTES};

/// Bit 47 of a generation's word: replayed already, kept with its damage until the user
/// frees it (`dmsetup message <dev> 0 drop_damaged`); never replayed again.
pub const GEN_HELD_BIT: u64 = 1 << 47;
use serde::Serialize;

/// A parsed DPWC cache, borrowing the image's bytes.
#[derive(Debug, Serialize)]
pub struct Cache<'a> {
    /// Where the PM device starts in the image (after the pfn info block of an NVDIMM image).
    pub device_offset: u64,
    pub superblock: Superblock,
    /// Every generation of the table, in table order.
    pub generations: Vec<Generation<'a>>,
}

/// One generation of the table.
#[derive(Debug, Serialize)]
pub struct Generation<'a> {
    /// Its index in the table.
    pub index: u32,
    /// 0 for a free generation, which recovery never replays (without [`GEN_HELD_BIT`]).
    pub gen_id: u64,
    /// Held for its damage: walked and reported, never replayed.
    pub held: bool,
    /// Its word's CRC fails: live or not is unknown; held as it is, not walked.
    pub damaged_word: bool,
    pub chunks: Vec<Chunk<'a>>,
}

/// One chunk of a generation; a free generation's chunks are not walked (no entries).
#[derive(Debug, Serialize)]
pub struct Chunk<'a> {
    pub index: u32,
    /// The chunk's `used` counter as stored (0 when damaged).
    pub used: u64,
    /// The counter's CRC fails: where its entries end is unknown; not walked.
    pub damaged_used: bool,
    pub entries: Vec<Entry<'a>>,
    /// The damaged entries: bodies skipped, and the header that stopped the walk.
    pub corrupt: Vec<CorruptEntry>,
}

impl Generation<'_> {
    pub fn is_live(&self) -> bool {
        self.gen_id != 0
    }
}

impl<'a> Cache<'a> {
    /// Reads `image`: the bytes of the PM device, or of the NVDIMM that holds it.
    pub fn parse(image: &'a [u8]) -> Result<Self, SuperblockError> {
        let (device_offset, device) = pm_device(image);
        let superblock = Superblock::parse(device)?;
        let generations = (0..superblock.generations)
            .map(|g| read_generation(device, &superblock, g))
            .collect();
        Ok(Self {
            device_offset,
            superblock,
            generations,
        })
    }

    /// Every valid entry of every live generation.
    pub fn entries(&self) -> impl Iterator<Item = &Entry<'a>> {
        self.generations
            .iter()
            .flat_map(|g| &g.chunks)
            .flat_map(|c| &c.entries)
    }

    /// Every damaged entry of every live generation.
    pub fn corrupt(&self) -> impl Iterator<Item = &CorruptEntry> {
        self.generations
            .iter()
            .flat_map(|g| &g.chunks)
            .flat_map(|c| &c.corrupt)
    }

    /// What the module counts as `corrupt` at load: damaged entries and table words.
    pub fn damaged(&self) -> usize {
        let words = self.generations.iter().map(|g| {
            usize::from(g.damaged_word) + g.chunks.iter().filter(|c| c.damaged_used).count()
        });
        self.corrupt().count() + words.sum::<usize>()
    }

    /// The valid entries of the generations not held, in the order recovery writes them:
    /// by (gen_id, entry id).
    pub fn replay_order(&self) -> Vec<&Entry<'a>> {
        let mut order: Vec<_> = self
            .generations
            .iter()
            .filter(|g| !g.held)
            .flat_map(|g| &g.chunks)
            .flat_map(|c| &c.entries)
            .collect();
        order.sort_by_key(|e| (e.gen_id, e.header.id));
        order
    }

    /// (gen_id, entry id) pairs that more than one valid entry carries: the order between
    /// them is undefined, which the writer must never allow.
    pub fn duplicate_ids(&self) -> Vec<(u64, u64)> {
        let keys: Vec<_> = self
            .replay_order()
            .iter()
            .map(|e| (e.gen_id, e.header.id))
            .collect();
        let mut duplicates: Vec<_> = keys
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        duplicates.dedup();
        duplicates
    }

    /// What recovery writes to the origin: every entry of [`Self::replay_order`] applied.
    pub fn replay(&self) -> SectorMap<'a> {
        let mut map = SectorMap::default();
        for entry in self.replay_order() {
            map.apply(entry);
        }
        map
    }
}

fn read_generation<'a>(image: &'a [u8], superblock: &Superblock, index: u32) -> Generation<'a> {
    let word = unseal(
        u64_at(image, superblock.gen_id_offset(index) as usize),
        GEN_WORD_BYTES,
    );
    let stored = word.unwrap_or(0);
    let (gen_id, held) = (
        stored & !GEN_HELD_BIT,
        stored & GEN_HELD_BIT != 0 || word.is_none(),
    );
    let chunks = (0..superblock.chunks_per_gen)
        .map(|c| {
            let used_word = u64_at(image, superblock.used_offset(index, c) as usize);
            let used = unseal(used_word, USED_WORD_BYTES);
            let damaged_used = gen_id != 0 && used.is_none();
            let used = used.unwrap_or(0);
            let (entries, corrupt) = if gen_id == 0 || damaged_used {
                (Vec::new(), Vec::new())
            } else {
                let start = superblock.chunk_offset(index, c) as usize;
                ChunkWalk {
                    generation: index,
                    gen_id,
                    chunk: c,
                    bytes: &image[start..start + superblock.chunk_size as usize],
                    used,
                    origin_sectors: superblock.origin_sectors,
                }
                .walk()
            };
            Chunk {
                index: c,
                used,
                damaged_used,
                entries,
                corrupt,
            }
        })
        .collect();
    Generation {
        index,
        gen_id,
        held,
        damaged_word: word.is_none(),
        chunks,
    }
}
