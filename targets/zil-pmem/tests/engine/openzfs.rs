//! The reader of the kernel's region (`persim_zil_pmem::openzfs`): found inside a larger
//! image, and its replay prediction for intact logs, damaged bodies, corrupt headers,
//! other datasets and synced txgs. (Against the kernel's own replay: crates/cli/tests/
//! run_vm.rs, `zil_pmem_dump_predicts_the_kernels_replay_*`.)

use persim_zil_pmem::openzfs::{
    end_mark, engine_region_to_kernel, last_synced_txg, LostReason, PoolLog, END_WORD,
};
use persim_zil_pmem::{Position, SUPERBLOCK_SPACE};

use crate::new_log;

/// Where the kernel puts the region on a vdev: after the front labels and boot area.
const REGION_AT: usize = 4 << 20;
const CHUNK: usize = 4096;

/// A record body as OpenZFS logs it: an `lr_t` of type `txtype`, then payload.
fn record(txtype: u64, len: usize) -> Vec<u8> {
    let mut body = vec![0x5a; len];
    body[..8].copy_from_slice(&txtype.to_le_bytes());
    body
}

/// An image with the region at `REGION_AT` in the kernel's format, holding (objset, txg,
/// txtype, new generation) entries in order, and the positions they got.
fn image(entries: &[(u64, u64, u64, bool)]) -> (Vec<u8>, Vec<Position>) {
    let log = new_log(CHUNK, 4, 1);
    let positions = (entries.iter())
        .map(|&(objset, txg, txtype, new_gen)| {
            log.append(objset, txg, &record(txtype, 300), new_gen)
                .unwrap()
        })
        .collect();
    let mut region = log.into_region().as_slice().to_vec();
    engine_region_to_kernel(&mut region);
    let mut image = vec![0; REGION_AT];
    image.extend_from_slice(&region);
    image.extend_from_slice(&[0; 8192]);
    (image, positions)
}

fn body_byte(entry: usize) -> usize {
    // Each 300-byte body takes a 256-byte header and 512 bytes: 768 per entry, chunk 0.
    REGION_AT + SUPERBLOCK_SPACE + entry * 768 + 256 + 100
}

#[test]
fn an_intact_log_replays_each_datasets_entries_of_unsynced_txgs() {
    let (image, pos) = image(&[
        (54, 10, 1, true),
        (54, 11, 9, true),
        (70, 11, 9, false),
        (54, 12, 5, true),
    ]);
    let log = PoolLog::find(&image).unwrap();
    assert_eq!(log.region_offset, REGION_AT);
    assert_eq!(log.entries.len(), 4);
    assert_eq!(log.entries[1].txtype, Some(9));
    assert!(log.corrupt_headers.is_empty());
    let replays = log.predict(10);
    assert_eq!(replays.len(), 2, "{replays:?}");
    assert_eq!((replays[0].objset, replays[0].claim_txg), (54, 11));
    assert_eq!(replays[0].replayed, [pos[1], pos[3]], "txg 10 is synced");
    assert_eq!(replays[1].replayed, [pos[2]]);
    assert!(replays.iter().all(|r| r.lost.is_empty() && !r.kept));
    assert!(log.predict(12).is_empty(), "every entry's txg is synced");
}

#[test]
fn a_damaged_body_loses_its_entry_and_later_generations_of_every_dataset() {
    let (mut image, pos) = image(&[
        (54, 11, 9, true),
        (54, 11, 9, false),
        (70, 11, 9, false),
        (70, 11, 2, true),
        (54, 11, 9, true),
    ]);
    image[body_byte(1)] ^= 0x10;
    let log = PoolLog::find(&image).unwrap();
    assert!(!log.entries[1].body_intact);
    let replays = log.predict(10);
    let (ours, other) = (&replays[0], &replays[1]);
    // The damaged entry's own generation is independent of it: its siblings replay.
    assert_eq!(ours.replayed, [pos[0]]);
    let lost: Vec<_> = ours.lost.iter().map(|l| (l.position, l.reason)).collect();
    assert_eq!(
        lost,
        [
            (pos[1], LostReason::Checksum),
            (pos[4], LostReason::LaterGeneration)
        ]
    );
    assert_eq!(other.replayed, [pos[2]]);
    assert_eq!(other.lost[0].position, pos[3]);
    assert!(ours.kept && other.kept, "a lost entry keeps the log");
}

#[test]
fn a_missing_entry_fails_the_next_generations_dependency() {
    let (mut image, pos) = image(&[(54, 11, 9, true), (54, 11, 9, false), (54, 11, 5, true)]);
    // Entry 1's header torn, as a crash leaves it over the end mark (its first word the
    // end mark's): the chunk's walk ends there, so entry 2 is not found either; move entry
    // 2 to chunk 1 so that only its dependency is short.
    let chunk0 = REGION_AT + SUPERBLOCK_SPACE;
    image.copy_within(chunk0 + 1536..chunk0 + 2304, chunk0 + CHUNK);
    image[chunk0 + CHUNK + 768..][..256].copy_from_slice(&end_mark());
    image[chunk0 + 768..chunk0 + 776].copy_from_slice(&END_WORD.to_le_bytes());
    let log = PoolLog::find(&image).unwrap();
    assert!(log.corrupt_headers.is_empty(), "a torn header is no damage");
    let replay = &log.predict(10)[0];
    assert_eq!(replay.replayed, [pos[0]]);
    assert_eq!(replay.lost[0].position, pos[2]);
    assert_eq!(replay.lost[0].reason, LostReason::DependencyMissing);
    assert!(replay.kept);
}

#[test]
fn a_corrupt_header_keeps_every_datasets_log() {
    let (mut image, pos) = image(&[(54, 11, 9, true), (54, 11, 9, false), (70, 11, 9, false)]);
    // A flipped bit in entry 1's txg: its checksum fails though every field is set.
    image[REGION_AT + SUPERBLOCK_SPACE + 768 + 24] ^= 0x40;
    let log = PoolLog::find(&image).unwrap();
    assert_eq!(log.corrupt_headers.len(), 1);
    assert_eq!(
        log.entries.len(),
        1,
        "the chunk's walk ends at the corrupt header"
    );
    let replays = log.predict(10);
    assert_eq!(replays.len(), 1);
    assert_eq!(replays[0].replayed, [pos[0]]);
    assert!(replays[0].kept);
}

/// The slot where a chunk's walk stops: the end mark, or a header torn with it (a crash),
/// is the log's end; zeroed or overwritten (damage), it is a corrupt header.
#[test]
fn a_zeroed_or_overwritten_end_of_a_chunk_is_damage_and_a_torn_one_is_not() {
    let (intact, pos) = image(&[(54, 11, 9, true), (54, 11, 9, false)]);
    let chunk0 = REGION_AT + SUPERBLOCK_SPACE;
    let chunk1 = chunk0 + CHUNK;
    assert_eq!(
        intact[chunk0 + 1536..][..256],
        end_mark(),
        "after the last entry"
    );
    assert_eq!(intact[chunk1..][..256], end_mark(), "a free chunk's start");
    let log = PoolLog::find(&intact).unwrap();
    assert!(log.corrupt_headers.is_empty());
    assert_eq!(log.predict(10)[0].replayed, pos);

    // Entry 2's header written over the end mark, cut after any number of its words: each
    // line persists a prefix of its stores.
    let header = intact[chunk0 + 768..][..256].to_vec();
    for k in 1..16 {
        let mut torn = intact.clone();
        torn[chunk0 + 768..][..256].copy_from_slice(&end_mark());
        torn[chunk0 + 768..][..k * 8].copy_from_slice(&header[..k * 8]);
        let log = PoolLog::find(&torn).unwrap();
        assert!(log.corrupt_headers.is_empty(), "{k} words");
        assert_eq!(log.predict(10)[0].replayed, [pos[0]], "{k} words");
    }

    // An end mark zeroed in part still ends the chunk: nothing is lost.
    let mut masked = intact.clone();
    masked[chunk0 + 1536..][..64].fill(0);
    let log = PoolLog::find(&masked).unwrap();
    assert!(log.corrupt_headers.is_empty());
    assert_eq!(log.predict(10)[0].replayed, pos);

    // Damage: the last header, or the chunk's first, zeroed in part or overwritten; an
    // end mark zeroed whole.
    for (at, len, byte) in [
        (chunk0 + 768, 64, 0),
        (chunk0 + 768 + 64, 64, 0),
        (chunk0 + 768 + 24, 8, 0x5a),
        (chunk0, 256, 0),
        (chunk0 + 1536, 256, 0),
        (chunk1, 256, 0),
    ] {
        let mut damaged = intact.clone();
        damaged[at..at + len].fill(byte);
        let log = PoolLog::find(&damaged).unwrap();
        assert_eq!(log.corrupt_headers.len(), 1, "{len} bytes at {at:#x}");
        // (The kernel then has every dataset claim a log, which it keeps.)
        assert!(
            log.predict(10).iter().all(|r| r.kept),
            "{len} bytes at {at:#x}"
        );
    }
}

#[test]
fn no_region_and_a_truncated_region_are_refused() {
    assert!(PoolLog::find(&vec![0; 1 << 20]).is_err());
    let (image, _) = image(&[(54, 11, 9, true)]);
    let err = PoolLog::find(&image[..REGION_AT + 2 * CHUNK]).unwrap_err();
    assert!(
        err.to_string().contains("more than the image holds"),
        "{err}"
    );
}

#[test]
fn no_uberblock_in_an_image_without_labels() {
    assert_eq!(last_synced_txg(&vec![0; 1 << 20]), None);
}

/// An image of a DOS-partitioned disk whose partition (at sector 32, as fdisk makes it on
/// the VM's small NVMe disk) holds, in label 0's ring at slot `slot`, the uberblock of a
/// real pool (OpenZFS 2.3.2, ashift 12: 4 KiB slots), which it wrote in slot 10 at txg 10.
fn disk_with_uberblock(slot: usize) -> Vec<u8> {
    let uberblock = include_bytes!("../data/uberblock-txg10-slot10.bin");
    let mut disk = vec![0; 1 << 20];
    disk[446 + 4] = 0x83;
    disk[446 + 8..446 + 12].copy_from_slice(&32u32.to_le_bytes());
    disk[510..512].copy_from_slice(&[0x55, 0xaa]);
    let at = 32 * 512 + (128 << 10) + slot * 4096;
    disk[at..at + 4096].copy_from_slice(uberblock);
    disk
}

#[test]
fn the_last_synced_txg_is_read_from_an_intact_uberblock_only() {
    assert_eq!(last_synced_txg(&disk_with_uberblock(10)), Some(10));
    // The label checksum's verifier is the slot's offset: moved, the uberblock fails it.
    assert_eq!(last_synced_txg(&disk_with_uberblock(11)), None);
    let mut torn = disk_with_uberblock(10);
    torn[32 * 512 + (128 << 10) + 10 * 4096 + 2048] ^= 1;
    assert_eq!(last_synced_txg(&torn), None);
}
