//! A whole PM image read as recovery reads it: the superblock, the generation table, the
//! valid entries of every live generation's chunks, and the order they replay in.

use crate::entry::{ChunkWalk, CorruptEntry, Entry};
use crate::nvdimm::pm_device;
use crate::replay::SectorMap;
use crate::superblock::{u64_at, Superblock, SuperblockError};

/// Bit 63 of a generation's id on PM: replayed already, kept with its damaged entries until
/// the user frees it (`dmsetup message <dev> 0 drop_damaged`); never replayed again.
pub const GEN_HELD_BIT: u64 = 1 << 63;
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
    /// Held for its damaged entries: walked and reported, never replayed.
    pub held: bool,
    pub chunks: Vec<Chunk<'a>>,
}

/// One chunk of a generation; a free generation's chunks are not walked (no entries).
#[derive(Debug, Serialize)]
pub struct Chunk<'a> {
    pub index: u32,
    /// The chunk's `used` counter as stored.
    pub used: u64,
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
    let stored = u64_at(image, superblock.gen_id_offset(index) as usize);
    let (gen_id, held) = (stored & !GEN_HELD_BIT, stored & GEN_HELD_BIT != 0);
    let chunks = (0..superblock.chunks_per_gen)
        .map(|c| {
            let used = u64_at(image, superblock.used_offset(index, c) as usize);
            let (entries, corrupt) = if stored == 0 {
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
                entries,
                corrupt,
            }
        })
        .collect();
    Generation {
        index,
        gen_id,
        held,
        chunks,
    }
}
