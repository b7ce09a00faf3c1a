//! Random sequences of appends, releases and reopenings against a model of what the log
//! must hold.

use std::collections::BTreeMap;

use persim_ringbuf::{AppendError, Eadr, HeapRegion, RingBuf, SUPERBLOCK_SPACE};
use proptest::prelude::*;

use crate::{body, recovered};

#[derive(Clone, Debug)]
enum Step {
    /// Append a body of `len % (max_body_len + 1)` bytes.
    Append(usize),
    /// Release up to the id at this fraction (in 1/256ths) of the ids appended so far.
    Release(u8),
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        // Mostly small bodies; some as large as a chunk allows, to fill chunks exactly.
        6 => (0usize..600).prop_map(Step::Append),
        2 => any::<usize>().prop_map(Step::Append),
        1 => any::<u8>().prop_map(Step::Release),
        1 => Just(Step::Reopen),
    ]
}

/// Checks that the log holds only entries of `model`, in id order and intact, and all of
/// them from `floor` on; then forgets the entries the log no longer has.
fn verify<const ALIGN: usize>(
    log: &mut RingBuf<HeapRegion, Eadr, ALIGN>,
    model: &mut BTreeMap<u64, Vec<u8>>,
    floor: u64,
) {
    let entries = recovered(log);
    let ids: Vec<u64> = entries.iter().map(|(id, _)| *id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascend: {ids:?}");
    for (id, data) in &entries {
        assert_eq!(
            model.get(id),
            Some(data),
            "entry {id} is one that was appended"
        );
    }
    for id in model.range(floor..).map(|(id, _)| id) {
        assert!(ids.contains(id), "entry {id} survives");
    }
    model.retain(|id, _| ids.contains(id));
}

/// Runs `steps` with one committer. Entries may only vanish in a release, and only those
/// below its release point; at every other check the log holds exactly the model.
fn check<const ALIGN: usize>(chunk_lines: usize, chunk_count: usize, steps: &[Step]) {
    let chunk_size = chunk_lines * ALIGN;
    let region = HeapRegion::new(SUPERBLOCK_SPACE + chunk_count * chunk_size);
    let mut log = RingBuf::<_, _, ALIGN>::format(region, Eadr, chunk_size, 1).unwrap();
    let max = log.max_body_len();
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for (n, step) in steps.iter().enumerate() {
        match *step {
            Step::Append(len) => {
                let data = body(n as u64, len % (max + 1));
                let id = match log.append(&data) {
                    Err(AppendError::LogFull { .. }) => {
                        // Make room as a user would. With one committer every chunk is full
                        // now, so this frees them all and the retry succeeds.
                        assert_eq!(log.release(u64::MAX), chunk_count);
                        verify(&mut log, &mut model, u64::MAX);
                        log.append(&data)
                    }
                    result => result,
                }
                .unwrap_or_else(|e| panic!("append of {} bytes: {e}", data.len()));
                assert!(model.keys().all(|&old| old < id), "ids ascend");
                model.insert(id, data);
            }
            Step::Release(fraction) => {
                let ids: Vec<u64> = model.keys().copied().collect();
                let up_to = ids
                    .get(ids.len() * fraction as usize / 256)
                    .copied()
                    .unwrap_or(0);
                log.release(up_to);
                verify(&mut log, &mut model, up_to);
            }
            Step::Reopen => {
                let (region, access) = log.into_parts();
                log = RingBuf::open(region, access, 1).unwrap();
            }
        }
        verify(&mut log, &mut model, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn appends_survive_reopen_align_64(
        chunk_lines in 2usize..40,
        chunk_count in 1usize..6,
        steps in prop::collection::vec(step(), 1..80),
    ) {
        check::<64>(chunk_lines, chunk_count, &steps);
    }

    #[test]
    fn appends_survive_reopen_align_256(
        chunk_lines in 1usize..12,
        chunk_count in 1usize..6,
        steps in prop::collection::vec(step(), 1..80),
    ) {
        check::<256>(chunk_lines, chunk_count, &steps);
    }
}

#[test]
fn reopened_log_continues_ids_in_a_fresh_chunk() {
    let log =
        RingBuf::<_, _, 64>::format(HeapRegion::new(SUPERBLOCK_SPACE + 4 * 1024), Eadr, 1024, 1)
            .unwrap();
    assert_eq!(log.append(b"a"), Ok(1));
    assert_eq!(log.append(b"b"), Ok(2));
    let (region, access) = log.into_parts();
    let mut log = RingBuf::<_, _, 64>::open(region, access, 1).unwrap();
    assert_eq!(log.append(b"c"), Ok(3));
    assert_eq!(
        recovered(&mut log),
        [(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"c".to_vec())]
    );
    // Entries 1 and 2 share a chunk that is no longer appended to, so it can be released.
    assert_eq!(log.release(3), 1);
    assert_eq!(recovered(&mut log), [(3, b"c".to_vec())]);
}
