//! The reader on images built by the layout: what recovery walks, skips and replays.

use dpwc_reader::{
    header_crc, Cache, Corruption, ImageBuilder, Op, SectorState, Superblock, SuperblockError,
    GEN_HELD_BIT, HEADER_LEN, SECTOR,
};

const CHUNK: u32 = 8192;

/// 3 generations × 2 chunks of 8 KiB over a 1024-sector origin.
fn builder() -> ImageBuilder {
    ImageBuilder::format(Superblock::new(CHUNK, 2, 3, 1024))
}

fn write(sector: u64, data: &[u8]) -> Op<'_> {
    Op::Write { sector, data }
}

fn keys(cache: &Cache) -> Vec<(u64, u64)> {
    cache
        .replay_order()
        .iter()
        .map(|e| (e.gen_id, e.header.id))
        .collect()
}

fn written(byte: u8) -> Option<SectorState<'static>> {
    let bytes: &'static [u8] = Box::leak(vec![byte; SECTOR as usize].into_boxed_slice());
    Some(SectorState::Written(bytes))
}

#[test]
fn a_valid_log_replays_in_generation_then_entry_order() {
    let mut b = builder();
    // Slot 2 holds the older generation (id 7), slot 0 the newer (id 8): table order is
    // not replay order. Ids interleave across chunks, as concurrent writers leave them.
    b.open_generation(2, 7);
    b.append(2, 1, 1, write(10, &[1; 512])).unwrap();
    b.append(2, 0, 2, write(10, &[2; 1024])).unwrap();
    b.append(2, 1, 3, write(20, &[3; 512])).unwrap();
    b.open_generation(0, 8);
    b.append(0, 1, 2, write(11, &[5; 512])).unwrap();
    b.append(0, 0, 1, write(10, &[4; 512])).unwrap();
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();

    assert_eq!(keys(&cache), [(7, 1), (7, 2), (7, 3), (8, 1), (8, 2)]);
    assert_eq!(cache.corrupt().count(), 0);
    let chunk = &cache.generations[2].chunks[1];
    assert_eq!(chunk.used, 2 * (HEADER_LEN as u64 + 512));
    assert_eq!(
        chunk.entries.iter().map(|e| e.offset).collect::<Vec<_>>(),
        [0, 768]
    );
    let map = cache.replay();
    assert_eq!(map.get(10), written(4));
    assert_eq!(map.get(11), written(5));
    assert_eq!(map.get(20), written(3));
    assert_eq!(map.get(12), None);
    assert_eq!((map.written(), map.discarded()), (3, 0));
    assert!(cache.duplicate_ids().is_empty());
}

#[test]
fn a_flipped_data_byte_costs_its_entry_alone() {
    let mut b = builder();
    b.open_generation(0, 1);
    b.append(0, 0, 1, write(0, &[1; 512])).unwrap();
    let damaged = b.append(0, 0, 2, write(1, &[2; 512])).unwrap();
    b.append(0, 0, 3, write(2, &[3; 512])).unwrap();
    b.append(0, 1, 4, write(3, &[4; 512])).unwrap();
    let at = (b.superblock().chunk_offset(0, 0) + damaged) as usize + HEADER_LEN + 100;
    b.image_mut()[at] ^= 0x40;
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();

    // The intact header gives the damaged entry's length: entry 3 after it replays.
    assert_eq!(keys(&cache), [(1, 1), (1, 3), (1, 4)]);
    let corrupt: Vec<_> = cache.corrupt().collect();
    assert_eq!(corrupt.len(), 1);
    let corrupt = corrupt[0];
    assert_eq!(
        (corrupt.generation, corrupt.chunk, corrupt.offset),
        (0, 0, damaged)
    );
    assert_eq!(corrupt.header.unwrap().id, 2);
    assert!(matches!(corrupt.reason, Corruption::DataCrc { .. }));
    assert_eq!(cache.replay().get(1), None);
    assert_eq!(cache.replay().get(2), written(3));
}

#[test]
fn a_flipped_header_byte_stops_its_chunk() {
    let mut b = builder();
    b.open_generation(0, 1);
    let damaged = b.append(0, 0, 1, write(0, &[1; 512])).unwrap();
    b.append(0, 0, 2, write(1, &[2; 512])).unwrap();
    // The length: where the next entry starts is unknown, so nothing after it replays.
    let at = (b.superblock().chunk_offset(0, 0) + damaged) as usize + 25;
    b.image_mut()[at] ^= 4;
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    assert!(keys(&cache).is_empty());
    let corrupt: Vec<_> = cache.corrupt().collect();
    assert_eq!(corrupt.len(), 1);
    assert!(matches!(corrupt[0].reason, Corruption::HeaderCrc { .. }));
}

/// Recovery replayed a generation with damage and kept it (bit 63 of its id): a later load
/// reports it but never replays it again, which could undo newer writes.
#[test]
fn a_held_generation_is_walked_but_not_replayed() {
    let mut b = builder();
    b.open_generation(0, 3);
    b.append(0, 0, 1, write(0, &[1; 512])).unwrap();
    let damaged = b.append(0, 0, 2, write(1, &[2; 512])).unwrap();
    let at = (b.superblock().chunk_offset(0, 0) + damaged) as usize + HEADER_LEN;
    b.image_mut()[at] ^= 1;
    b.set_gen_id(0, 3 | GEN_HELD_BIT);
    b.open_generation(1, 4);
    b.append(1, 0, 1, write(2, &[3; 512])).unwrap();
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    let held = &cache.generations[0];
    assert_eq!(
        (held.gen_id, held.held, held.chunks[0].entries.len()),
        (3, true, 1)
    );
    assert_eq!(cache.corrupt().count(), 1);
    assert_eq!(keys(&cache), [(4, 1)]);
}

#[test]
fn a_flipped_header_byte_is_caught_by_the_checksum() {
    let mut b = builder();
    b.open_generation(0, 1);
    b.append(0, 0, 1, write(5, &[1; 512])).unwrap();
    // The sector field: the entry would land elsewhere if replayed.
    let at = b.superblock().chunk_offset(0, 0) as usize + 16;
    b.image_mut()[at] ^= 1;
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    assert!(cache.replay_order().is_empty());
    let corrupt = cache.corrupt().next().unwrap();
    assert_eq!(corrupt.header.unwrap().sector, 4);
    assert!(matches!(corrupt.reason, Corruption::HeaderCrc { .. }));
}

#[test]
fn used_beyond_the_last_complete_entry_reports_what_stopped_the_walk() {
    let mut b = builder();
    b.open_generation(0, 1);
    let end = 256 + 512;
    b.append(0, 0, 1, write(0, &[1; 512])).unwrap();
    // Chunk 0: zeros after the entry, where a counter says there is more.
    b.set_used(0, 0, end + 256);
    // Chunk 1: a whole header, but its data ends past the counter.
    b.append(0, 1, 2, write(1, &[2; 512])).unwrap();
    b.append(0, 1, 3, write(2, &[3; 1024])).unwrap();
    b.set_used(0, 1, end + 256 + 512);
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();

    assert_eq!(keys(&cache), [(1, 1), (1, 2)]);
    let corrupt: Vec<_> = cache.corrupt().collect();
    assert_eq!(
        corrupt[0].reason,
        Corruption::Magic { found: [0; 4] },
        "{}",
        corrupt[0]
    );
    assert_eq!(corrupt[0].offset, end);
    assert_eq!(
        corrupt[1].reason,
        Corruption::PastUsed {
            end: end + 256 + 1024,
            used: end + 256 + 512,
            chunk_size: CHUNK
        }
    );
}

#[test]
fn used_beyond_the_chunk_walks_to_the_chunks_end() {
    let mut b = builder();
    b.open_generation(0, 1);
    // 256 + 7680 bytes, then a header-only discard: the chunk is exactly full.
    let data = vec![9; CHUNK as usize - 2 * HEADER_LEN];
    b.append(0, 0, 1, write(0, &data)).unwrap();
    b.append(
        0,
        0,
        2,
        Op::Discard {
            sector: 0,
            len: 512,
        },
    )
    .unwrap();
    assert_eq!(b.used(0, 0), u64::from(CHUNK));
    b.set_used(0, 0, u64::MAX);
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    assert_eq!(keys(&cache), [(1, 1), (1, 2)]);
    assert_eq!(cache.corrupt().count(), 0);
    assert_eq!(cache.replay().written(), data.len() as u64 / SECTOR - 1);
}

#[test]
fn a_stale_entry_after_used_is_ignored() {
    let mut b = builder();
    b.open_generation(0, 1);
    let end = b.append(0, 0, 1, write(0, &[1; 512])).unwrap() + 768;
    // A complete, valid entry whose counter update never became durable.
    b.write_entry(0, 0, end, 2, write(0, &[2; 512]));
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    assert_eq!(keys(&cache), [(1, 1)]);
    assert_eq!(cache.corrupt().count(), 0);
    assert_eq!(cache.replay().get(0), written(1));
}

#[test]
fn a_free_generation_is_never_walked_or_replayed() {
    let mut b = builder();
    b.open_generation(1, 3);
    b.append(1, 0, 1, write(0, &[1; 512])).unwrap();
    b.set_gen_id(1, 0);
    // A damaged entry in a free generation is no corruption either.
    b.set_used(1, 1, 256);
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    assert!(!cache.generations[1].is_live());
    assert_eq!(cache.generations[1].chunks[0].used, 768);
    assert_eq!(cache.entries().count(), 0);
    assert_eq!(cache.corrupt().count(), 0);
    assert_eq!(cache.replay().get(0), None);
}

/// The layout's reuse question: without the counter reset, the previous use's entries
/// replay under the new id, after the newer generation's data.
#[test]
fn a_generation_reused_without_resetting_its_counters_replays_stale_data() {
    let reused = |reset: bool| {
        let mut b = builder();
        b.open_generation(0, 1);
        b.append(0, 0, 1, write(0, &[1; 512])).unwrap();
        b.open_generation(1, 2);
        b.append(1, 0, 1, write(0, &[2; 512])).unwrap();
        // Generation 1 (slot 0) is written back and freed, then the slot is reused as 3.
        b.set_gen_id(0, 0);
        if reset {
            b.open_generation(0, 3);
        } else {
            b.set_gen_id(0, 3);
        }
        let image = b.into_image();
        let cache = Cache::parse(&image).unwrap();
        let state = cache.replay().get(0);
        (keys(&cache), state == written(2))
    };
    assert_eq!(reused(true), (vec![(2, 1)], true));
    assert_eq!(reused(false), (vec![(2, 1), (3, 1)], false));
}

#[test]
fn discards_replay_as_discarded_ranges_that_later_writes_override() {
    let mut b = builder();
    b.open_generation(0, 1);
    b.append(0, 0, 1, write(8, &[1; 2048])).unwrap();
    b.append(
        0,
        0,
        2,
        Op::Discard {
            sector: 9,
            len: 1024,
        },
    )
    .unwrap();
    b.append(0, 1, 3, write(10, &[3; 512])).unwrap();
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    // A discard occupies a header only.
    assert_eq!(cache.generations[0].chunks[0].used, 256 + 2048 + 256);
    let map = cache.replay();
    assert_eq!(map.get(8), written(1));
    assert_eq!(map.get(9), Some(SectorState::Discarded));
    assert_eq!(map.get(10), written(3));
    assert_eq!(map.get(11), written(1));
    assert_eq!((map.written(), map.discarded()), (3, 1));
}

#[test]
fn bad_lengths_and_ranges_beyond_the_origin_are_corrupt() {
    let corrupt_of = |op: Op| {
        let mut b = builder();
        b.open_generation(0, 1);
        b.append(0, 0, 1, op).unwrap();
        let image = b.into_image();
        let cache = Cache::parse(&image).unwrap();
        assert_eq!(cache.entries().count(), 0);
        let reason = cache.corrupt().next().unwrap().reason.clone();
        reason
    };
    assert_eq!(
        corrupt_of(write(0, &[1; 100])),
        Corruption::Len { len: 100 }
    );
    assert_eq!(
        corrupt_of(Op::Discard { sector: 0, len: 0 }),
        Corruption::Len { len: 0 }
    );
    assert!(matches!(
        corrupt_of(write(1023, &[1; 1024])),
        Corruption::BeyondOrigin {
            sector: 1023,
            end: 1025,
            ..
        }
    ));
}

/// The module refuses flags it does not know, so the reader does too.
#[test]
fn unknown_flags_are_corrupt_even_with_a_valid_checksum() {
    let mut b = builder();
    b.open_generation(0, 1);
    b.append(0, 0, 1, write(0, &[1; 512])).unwrap();
    let at = b.superblock().chunk_offset(0, 0) as usize;
    let image = b.image_mut();
    image[at + 4] = 2;
    let header: [u8; HEADER_LEN] = image[at..at + HEADER_LEN].try_into().unwrap();
    image[at + 32..at + 36].copy_from_slice(&header_crc(&header).to_le_bytes());
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    assert_eq!(cache.entries().count(), 0);
    let corrupt = cache.corrupt().next().unwrap();
    assert_eq!(corrupt.reason, Corruption::Flags { flags: 2 });
}

#[test]
fn duplicate_ids_are_reported() {
    let mut b = builder();
    b.open_generation(0, 1);
    b.append(0, 0, 5, write(0, &[1; 512])).unwrap();
    b.append(0, 1, 5, write(1, &[1; 512])).unwrap();
    let image = b.into_image();
    assert_eq!(Cache::parse(&image).unwrap().duplicate_ids(), [(1, 5)]);
}

#[test]
fn a_mismatching_superblock_crc_refuses_the_image() {
    let mut image = builder().into_image();
    image[12] ^= 1; // chunk_size
    assert!(matches!(
        Cache::parse(&image),
        Err(SuperblockError::Crc { .. })
    ));
}

#[test]
fn a_truncated_image_is_an_error() {
    let image = builder().into_image();
    let err = Cache::parse(&image[..image.len() - 1]).unwrap_err();
    assert!(
        matches!(err, SuperblockError::DataBeyondImage { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("truncated"), "{err}");
}

/// The table's words carry their CRC: a flipped bit in a `used` counter costs its chunk, in a
/// generation's id its generation, and both are counted as damage, never replayed silently.
#[test]
fn a_flipped_bit_in_the_table_is_damage_not_a_shorter_log() {
    let mut b = builder();
    b.open_generation(0, 1);
    b.append(0, 0, 1, write(0, &[1; 512])).unwrap();
    b.append(0, 1, 2, write(1, &[2; 512])).unwrap();
    b.open_generation(1, 2);
    b.append(1, 0, 1, write(2, &[3; 512])).unwrap();
    let used = b.superblock().used_offset(0, 1) as usize;
    let gen = b.superblock().gen_id_offset(1) as usize;
    b.image_mut()[used + 1] ^= 0x10;
    b.image_mut()[gen] ^= 0x01;
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();
    assert!(cache.generations[0].chunks[1].damaged_used);
    let damaged = &cache.generations[1];
    assert!(
        damaged.damaged_word && damaged.held && damaged.chunks.iter().all(|c| c.entries.is_empty())
    );
    assert_eq!(cache.damaged(), 2);
    assert_eq!(keys(&cache), [(1, 1)]);
}

/// The module writes only an entry header's first line (layout 4): whatever its other
/// lines hold from the chunk's earlier use neither damages the entry nor changes its replay.
#[test]
fn an_entry_header_past_its_first_line_is_not_read() {
    let mut b = builder();
    b.open_generation(0, 1);
    let offset = b.append(0, 0, 1, write(10, &[6; 512])).unwrap();
    let at = (b.superblock().chunk_offset(0, 0) + offset) as usize;
    b.image_mut()[at + 64..at + HEADER_LEN].fill(0xa5);
    let image = b.into_image();
    let cache = Cache::parse(&image).unwrap();

    assert_eq!(keys(&cache), [(1, 1)]);
    assert_eq!(cache.corrupt().count(), 0);
    assert_eq!(cache.replay().get(10), written(6));
}
