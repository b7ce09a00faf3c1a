//! Property: writes and discards appended through the builder, spread over chunks and
//! generations as concurrent writers would spread them, replay to the same sectors as
//! applying them to the origin in order.

use dpwc_reader::{Cache, ImageBuilder, Op, SectorState, Superblock, SECTOR};
use proptest::prelude::*;
use std::collections::BTreeMap;

const ORIGIN: u64 = 64;
const GENERATIONS: u32 = 3;
const CHUNKS: u32 = 3;

#[derive(Clone, Debug)]
struct Request {
    sector: u64,
    sectors: u64,
    discard: bool,
    /// Seed of the data's bytes.
    seed: u8,
    /// The chunk the writer's slot fills.
    chunk: u32,
    /// Close the open generation before this request.
    new_generation: bool,
}

fn request() -> impl Strategy<Value = Request> {
    (
        0..ORIGIN,
        1..=4u64,
        prop::bool::weighted(0.2),
        any::<u8>(),
        0..CHUNKS,
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(sector, sectors, discard, seed, chunk, new_generation)| Request {
                sector,
                sectors: sectors.min(ORIGIN - sector),
                discard,
                seed,
                chunk,
                new_generation,
            },
        )
}

fn data_of(request: &Request) -> Vec<u8> {
    let len = (request.sectors * SECTOR) as usize;
    (0..len)
        .map(|i| request.seed.wrapping_add((i / 7) as u8))
        .collect()
}

/// Appends the requests as the module does: ids per generation from 1, a full chunk moves
/// the writer to the next one, a full generation opens the next table slot under the next
/// id. Returns the image and how many requests it holds (the rest did not fit).
fn build(requests: &[Request], first_slot: u32, first_id: u64) -> (Vec<u8>, usize) {
    let mut b = ImageBuilder::format(Superblock::new(8192, CHUNKS, GENERATIONS, ORIGIN));
    let (mut slot, mut gen_id, mut opened, mut next_id) = (first_slot, first_id, 1, 1);
    b.open_generation(slot, gen_id);
    for (held, request) in requests.iter().enumerate() {
        let data = data_of(request);
        let op = if request.discard {
            Op::Discard {
                sector: request.sector,
                len: data.len() as u32,
            }
        } else {
            Op::Write {
                sector: request.sector,
                data: &data,
            }
        };
        // Without a free slot left, the request stays in the open generation.
        let close = request.new_generation && opened < GENERATIONS;
        let mut placed = !close
            && (0..CHUNKS).any(|i| {
                b.append(slot, (request.chunk + i) % CHUNKS, next_id, op)
                    .is_some()
            });
        if !placed {
            if opened == GENERATIONS {
                return (b.into_image(), held);
            }
            (slot, gen_id, opened, next_id) = ((slot + 1) % GENERATIONS, gen_id + 1, opened + 1, 1);
            b.open_generation(slot, gen_id);
            placed = b.append(slot, request.chunk, next_id, op).is_some();
        }
        assert!(placed, "an empty chunk holds any request");
        next_id += 1;
    }
    (b.into_image(), requests.len())
}

proptest! {
    #[test]
    fn replay_equals_the_writes_in_order(
        requests in prop::collection::vec(request(), 0..60),
        first_slot in 0..GENERATIONS,
        first_id in 1..1000u64,
    ) {
        let (image, held) = build(&requests, first_slot, first_id);
        let mut origin: BTreeMap<u64, Option<Vec<u8>>> = BTreeMap::new();
        for request in &requests[..held] {
            let data = data_of(request);
            for i in 0..request.sectors {
                let bytes = &data[(i * SECTOR) as usize..((i + 1) * SECTOR) as usize];
                origin.insert(request.sector + i, (!request.discard).then(|| bytes.to_vec()));
            }
        }
        let cache = Cache::parse(&image).unwrap();
        prop_assert_eq!(cache.corrupt().count(), 0);
        prop_assert_eq!(cache.replay_order().len(), held);
        let map = cache.replay();
        for sector in 0..ORIGIN {
            let expected = origin.get(&sector).map(|state| match state {
                Some(bytes) => SectorState::Written(bytes),
                None => SectorState::Discarded,
            });
            prop_assert_eq!(map.get(sector), expected, "sector {}", sector);
        }
    }
}
