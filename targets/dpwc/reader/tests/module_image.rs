//! The reader on a PM device that dm-dpwc.ko (targets/dpwc/module) wrote in the guest of
//! vm/ext4-dpwc.toml: the log holds the writes and the discard in order, and what the
//! reader says recovery replays is exactly what the module's recovery writes to the origin.
//! Skipped, with the reason, without QEMU, the guest kernel or the built module.

use dpwc_reader::{Cache, SectorState, HEADER_LEN, SECTOR};
use persim_vm::testing::{kmod_ready, vm_ready};
use persim_vm::{default_config_dir, prepare, QemuSpec, Vm, VmConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(120);
/// Sectors of a 4 KiB block.
const BLOCK: u64 = 8;

/// `pattern` repeated over `sectors` sectors, as `yes X | head -c` writes it.
fn pattern(pattern: &[u8], sectors: u64) -> Vec<u8> {
    pattern
        .iter()
        .copied()
        .cycle()
        .take((sectors * SECTOR) as usize)
        .collect()
}

/// The replay states of sectors that `bytes` were written to.
fn written(bytes: &[u8]) -> Vec<Option<SectorState<'_>>> {
    bytes
        .chunks(SECTOR as usize)
        .map(|b| Some(SectorState::Written(b)))
        .collect()
}

fn sectors_of(image: &[u8], start: u64, end: u64) -> &[u8] {
    &image[(start * SECTOR) as usize..(end * SECTOR) as usize]
}

/// Runs `script` in the guest with `create` (the dpwc table over the NVMe origin and the
/// PM device, with the arguments given) and `status` (its counters) defined.
fn run(vm: &mut Vm, script: &str) -> String {
    let script = format!(
        "set -e
sz=$(blockdev --getsz /dev/nvme0n1)
create() {{ dmsetup --noudevsync create dpwc --table \"0 $sz dpwc /dev/nvme0n1 /dev/pmem0 $*\" && dmsetup mknodes dpwc; }}
status() {{ dmsetup status dpwc | cut -d' ' -f4-; }}
{script}"
    );
    let out = vm.run(&script, TIMEOUT).unwrap();
    assert_eq!(out.exit_code, 0, "{script}: {}", out.output);
    out.output
}

fn boot(spec: &QemuSpec) -> Vm {
    Vm::boot(spec, TIMEOUT).unwrap()
}

fn blank(path: &Path, size: u64) {
    std::fs::File::create(path).unwrap().set_len(size).unwrap();
}

#[test]
fn the_modules_log_reads_back_and_replays_as_the_modules_recovery_does() {
    let test = "the_modules_log_reads_back_and_replays_as_the_modules_recovery_does";
    let path = default_config_dir().join("ext4-dpwc.toml");
    if !path.is_file() {
        let reason = format!("no {} (the dpwc module's VM configuration)", path.display());
        persim_vm::testing::skip(test, &reason);
        return;
    }
    let mut config = VmConfig::load(&path).unwrap();
    config.tools.push("blkdiscard".to_owned());
    let Some(artifacts) = vm_ready(test, &config) else {
        return;
    };
    if kmod_ready(test, &config, "dm-dpwc").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (pm, disk) = (dir.path().join("pm.img"), dir.path().join("origin.img"));
    blank(&pm, config.pm_size());
    blank(&disk, config.blk_size());
    let cache_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("persim-cache");
    let prepared = prepare(&config, &artifacts, &cache_dir).unwrap();
    let spec = QemuSpec {
        blk_file: Some(disk.clone()),
        ..prepared.qemu_spec(&config, pm.clone())
    };

    // A small log whose writeback starts only at 90 % full: everything stays in the log.
    // Blocks 10-11 "A", block 11 again "B"; blocks 64-65 discarded, block 64 then "C";
    // 40 random blocks from block 100 fill more than one generation. `fullblock`: a short
    // read from the pipe would split a write into two entries.
    let mut vm = boot(&spec);
    // Where /dev/pmem0 starts in the NVDIMM file, as the guest's kernel placed it.
    let resources = run(
        &mut vm,
        "cat /sys/block/pmem0/device/resource /sys/bus/nd/devices/region0/resource",
    );
    let resource: Vec<u64> = resources
        .lines()
        .map(|l| u64::from_str_radix(l.trim().trim_start_matches("0x"), 16).unwrap())
        .collect();
    let logged = run(
        &mut vm,
        "create format generations=3 chunks=2 chunk_kib=64 high_watermark=90 low_watermark=80
yes A | head -c 8192 | dd of=/dev/mapper/dpwc bs=8192 seek=5 iflag=fullblock oflag=direct status=none
yes B | head -c 4096 | dd of=/dev/mapper/dpwc bs=4096 seek=11 iflag=fullblock oflag=direct status=none
blkdiscard -o 262144 -l 8192 /dev/mapper/dpwc
yes C | head -c 4096 | dd of=/dev/mapper/dpwc bs=4096 seek=64 iflag=fullblock oflag=direct status=none
dd if=/dev/urandom of=/dev/mapper/dpwc bs=4096 seek=100 count=40 oflag=direct status=none
status",
    );
    vm.shutdown(TIMEOUT).unwrap();

    let image = std::fs::read(&pm).unwrap();
    let cache = Cache::parse(&image).unwrap();
    assert_eq!(cache.device_offset, resource[0] - resource[1]);
    let s = &cache.superblock;
    assert_eq!(
        (
            s.chunk_size,
            s.chunks_per_gen,
            s.generations,
            s.origin_sectors
        ),
        (64 << 10, 2, 3, config.blk_size() / SECTOR)
    );
    assert_eq!(cache.corrupt().count(), 0, "{logged}");
    // One writer: each live generation's ids are 1..=n, the generations' ids consecutive.
    let live: Vec<_> = cache.generations.iter().filter(|g| g.is_live()).collect();
    assert!(live.len() >= 2, "{cache:#?}");
    let order = cache.replay_order();
    for (i, entry) in order.iter().enumerate().skip(1) {
        let prev = order[i - 1];
        assert!(
            (entry.gen_id, entry.header.id) == (prev.gen_id, prev.header.id + 1)
                || (entry.gen_id, entry.header.id) == (prev.gen_id + 1, 1),
            "{:?} after {:?}",
            (entry.gen_id, entry.header.id),
            (prev.gen_id, prev.header.id)
        );
    }
    assert_eq!(order.iter().filter(|e| e.header.is_discard()).count(), 1);
    let map = cache.replay();
    let state = |start: u64, end: u64| -> Vec<_> { (start..end).map(|s| map.get(s)).collect() };
    assert_eq!(state(80, 88), written(&pattern(b"A\n", BLOCK)));
    assert_eq!(state(88, 96), written(&pattern(b"B\n", BLOCK)));
    assert_eq!(state(512, 520), written(&pattern(b"C\n", BLOCK)));
    assert_eq!(
        state(520, 528),
        vec![Some(SectorState::Discarded); BLOCK as usize]
    );
    assert_eq!(
        (map.written(), map.discarded()),
        ((2 + 1 + 40) * BLOCK, BLOCK)
    );
    // Nothing was written back: the replay's data can only have come from the log.
    let origin = std::fs::read(&disk).unwrap();
    assert!(
        origin.iter().all(|&b| b == 0),
        "the origin was written before recovery"
    );

    // A flipped bit in the body of the entry of "B" (block 11, over "A"): that entry
    // alone is lost, the rest of its chunk still replays, and block 11 keeps "A".
    let b = order
        .iter()
        .find(|e| e.header.sector == 88)
        .expect("the entry of B");
    let at = cache.device_offset
        + s.chunk_offset(b.generation, b.chunk)
        + b.offset
        + HEADER_LEN as u64
        + 100;
    let mut image = image.clone();
    image[at as usize] ^= 0x08;
    std::fs::write(&pm, &image).unwrap();
    let cache = Cache::parse(&image).unwrap();
    assert_eq!(cache.damaged(), 1);
    let order = cache.replay_order();
    let map = cache.replay();
    assert_eq!(map.get(88), written(&pattern(b"A\n", BLOCK))[0]);

    // The module's recovery on the same devices.
    let mut vm = boot(&spec);
    let recovered = run(&mut vm, "create\nstatus\ndmsetup remove dpwc");
    vm.shutdown(TIMEOUT).unwrap();
    assert!(
        recovered.contains(&format!("replayed={} ", order.len()))
            && recovered.contains("corrupt=1 ")
            && recovered.contains("held=1"),
        "{recovered}"
    );
    let origin = std::fs::read(&disk).unwrap();
    for extent in map.extents() {
        if let SectorState::Written(bytes) = extent.state {
            assert_eq!(
                sectors_of(&origin, extent.start, extent.end),
                bytes,
                "sectors {}..{}",
                extent.start,
                extent.end
            );
        }
    }
    // And nothing else: every other sector of the origin is still zero.
    let touched = |sector: u64| map.get(sector).is_some();
    let stray = (0..config.blk_size() / SECTOR)
        .find(|&s| !touched(s) && sectors_of(&origin, s, s + 1).iter().any(|&b| b != 0));
    assert_eq!(
        stray, None,
        "recovery wrote a sector the reader does not replay"
    );
    // Recovery freed every generation but the damaged one, held: nothing is left to replay.
    let image = std::fs::read(&pm).unwrap();
    let cache = Cache::parse(&image).unwrap();
    let live: Vec<_> = cache.generations.iter().filter(|g| g.is_live()).collect();
    assert!(live.len() == 1 && live[0].held, "{cache:#?}");
    assert!(cache.replay_order().is_empty());
    assert_eq!(cache.damaged(), 1);
}
