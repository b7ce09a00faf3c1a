//! Missing dependencies: replay stops before them and says where. (A damaged body:
//! tests/crash_consistency/flipped_bit.rs, which the mutants share.)

use persim_zil_pmem::{ReplayError, ReplayStop, SUPERBLOCK_SPACE};

use crate::{body, new_log, reopen, replay_all};

#[test]
fn an_entry_whose_dependency_is_missing_is_never_replayed() {
    let log = new_log(4096, 2, 1);
    // Generation 1: two independent entries of txg 1; generation 2 depends on both.
    let a = log.append(1, 1, &body(1, 100), true).unwrap();
    let b = log.append(1, 1, &body(2, 100), false).unwrap();
    let c = log.append(1, 1, &body(3, 100), true).unwrap();
    assert_eq!((a.gen, b.gen, c.gen), (1, 1, 2));
    let mut region = log.into_region();
    // Lose entry b: its header zeroed, as if it never reached PM. (Claim stops scanning
    // the chunk there, so c goes too; move c's bytes into the second chunk to keep it.)
    let chunk0 = SUPERBLOCK_SPACE;
    let chunk1 = SUPERBLOCK_SPACE + 4096;
    let bytes = region.as_mut_slice();
    bytes.copy_within(chunk0 + 1024..chunk0 + 1536, chunk1);
    bytes[chunk0 + 512..chunk0 + 768].fill(0);
    let (mut log, claim) = reopen(region, 0);
    let expected = ReplayStop::MissingDependency {
        entry: c,
        gen: 1,
        txg: 1,
        expected: 2,
        found: 1,
    };
    assert_eq!(claim.missing, Some(expected.clone()));
    assert!(claim
        .missing
        .as_ref()
        .unwrap()
        .to_string()
        .contains("missing"));
    let (applied, result) = replay_all(&mut log, &claim);
    assert_eq!(applied.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [a]);
    assert!(matches!(result, Err(ReplayError::Stopped(stop)) if stop == expected));
    // Appends stay refused: the consumer must decide what to do with the log.
    assert!(log.append(1, 2, b"x", true).is_err());
}

#[test]
fn a_flipped_reserved_bit_in_the_newest_header_is_damage_not_the_logs_end() {
    let log = new_log(4096, 2, 1);
    let a = log.append(1, 1, &body(1, 100), true).unwrap();
    let b = log.append(1, 1, &body(2, 100), true).unwrap();
    let mut region = log.into_region();
    // Entry b's header is at offset 512 of chunk 0; its reserved bytes start at 124.
    let reserved = SUPERBLOCK_SPACE + 512 + 200;
    region.as_mut_slice()[reserved] ^= 0x10;
    let (mut log, claim) = reopen(region, 0);
    let expected = ReplayStop::DamagedHeader {
        chunk: 0,
        offset: 512,
    };
    assert_eq!(claim.missing, Some(expected.clone()));
    // Entry a is intact, but the damaged header hid an entry of unknown order: nothing
    // is applied rather than a prefix that may skip it.
    let (applied, result) = replay_all(&mut log, &claim);
    assert_eq!(applied, []);
    assert!(matches!(result, Err(ReplayError::Stopped(stop)) if stop == expected));
    assert!(expected.to_string().contains("damaged"));
    assert_ne!(a, b);
}

#[test]
fn a_zeroed_newest_header_is_the_logs_end_not_damage() {
    let log = new_log(4096, 2, 1);
    let a = log.append(1, 1, &body(1, 100), true).unwrap();
    log.append(1, 1, &body(2, 100), true).unwrap();
    let mut region = log.into_region();
    // As if b's header never reached PM: its slot is still the zeroes a's append wrote.
    region.as_mut_slice()[SUPERBLOCK_SPACE + 512..][..256].fill(0);
    let (mut log, claim) = reopen(region, 0);
    assert_eq!(claim.missing, None);
    let (applied, result) = replay_all(&mut log, &claim);
    assert_eq!(applied.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [a]);
    assert!(result.is_ok());
}
