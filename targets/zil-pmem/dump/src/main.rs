//! `zil-pmem-dump`: the ZIL-PMEM log an OpenZFS pool left on its PM log vdev, and what the
//! kernel's replay of each dataset applies.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use persim_zil_pmem::openzfs::{last_synced_txg, DatasetReplay, PmEntry, PoolLog};
use serde_json::{json, Value};

/// Exit code for an image that cannot be read or holds no ZIL-PMEM log.
const EXIT_BAD_INPUT: u8 = 2;

#[derive(Parser)]
#[command(
    name = "zil-pmem-dump",
    version,
    about = "Print the ZIL-PMEM log on a pool's PM and what replay applies",
    long_about = "Reads the region OpenZFS with ZIL-PMEM's patches (targets/zil-pmem/openzfs) \
                  writes on a pool's pmem log vdev, as the kernel's import scans it, and prints \
                  the superblock, every valid entry (generation, id, dataset, txg, ZIL record \
                  type, body checksum) and each corrupt header. Given the txg the pool last \
                  synced (read from the main vdev's uberblocks with --pool-image, or given with \
                  --synced-txg), it predicts each dataset's replay at the first import after \
                  the crash: the entries applied, those lost and why, and whether the log is \
                  kept until `zfs set org.persim:zil_abandon=<claim txg>`.\n\n\
                  Examples:\n  \
                  zil-pmem-dump pm.img --pool-image nvme.img\n  \
                  zil-pmem-dump pm.img --synced-txg 41 --json\n\n\
                  Exit codes: 0 the log was read (damage included), 2 bad input."
)]
struct Args {
    /// The log vdev's PM device or an image of it.
    image: PathBuf,
    /// An image of the pool's main vdev (whole disk or partition): its uberblocks give the
    /// last synced txg.
    #[arg(long, conflicts_with = "synced_txg")]
    pool_image: Option<PathBuf>,
    /// The txg the pool last synced (`zdb -lu`), instead of --pool-image.
    #[arg(long)]
    synced_txg: Option<u64>,
    /// JSON for programs instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("zil-pmem-dump: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn run(args: &Args) -> Result<(), String> {
    let log = PoolLog::find(&read(&args.image)?).map_err(|e| e.to_string())?;
    let synced = match (&args.pool_image, args.synced_txg) {
        (Some(path), _) => Some(last_synced_txg(&read(path)?).ok_or_else(|| {
            format!(
                "no intact uberblock in {}: is it the pool's main vdev? (or give --synced-txg)",
                path.display()
            )
        })?),
        (None, txg) => txg,
    };
    let replays = synced.map(|txg| log.predict(txg));
    if args.json {
        println!("{:#}", to_json(&log, synced, replays.as_deref()));
    } else {
        print_text(&log, synced, replays.as_deref());
    }
    Ok(())
}

fn txtype_name(txtype: u64) -> &'static str {
    const NAMES: [&str; 25] = [
        "COMMIT",
        "CREATE",
        "MKDIR",
        "MKXATTR",
        "SYMLINK",
        "REMOVE",
        "RMDIR",
        "LINK",
        "RENAME",
        "WRITE",
        "TRUNCATE",
        "SETATTR",
        "ACL_V0",
        "ACL",
        "CREATE_ACL",
        "CREATE_ATTR",
        "CREATE_ACL_ATTR",
        "MKDIR_ACL",
        "MKDIR_ATTR",
        "MKDIR_ACL_ATTR",
        "WRITE2",
        "SETSAXATTR",
        "RENAME_EXCHANGE",
        "RENAME_WHITEOUT",
        "CLONE_RANGE",
    ];
    NAMES.get(txtype as usize).copied().unwrap_or("unknown")
}

fn entry_json(e: &PmEntry) -> Value {
    let h = &e.header;
    json!({
        "generation": h.position.gen, "id": h.position.id, "objset": h.objset, "txg": h.txg,
        "chunk": e.slot.chunk, "offset": e.slot.offset, "body_len": h.body_len,
        "body_intact": e.body_intact, "txtype": e.txtype.map(txtype_name),
    })
}

fn replay_json(r: &DatasetReplay) -> Value {
    let lost: Vec<Value> = (r.lost.iter())
        .map(|l| {
            json!({
                "generation": l.position.gen, "id": l.position.id, "txg": l.txg,
                "chunk": l.slot.chunk, "offset": l.slot.offset, "reason": l.reason.describe(),
            })
        })
        .collect();
    json!({
        "objset": r.objset, "claim_txg": r.claim_txg, "kept": r.kept,
        "replayed": r.replayed.iter().map(|p| (p.gen, p.id)).collect::<Vec<_>>(),
        "lost": lost,
    })
}

fn to_json(log: &PoolLog, synced: Option<u64>, replays: Option<&[DatasetReplay]>) -> Value {
    json!({
        "region_offset": log.region_offset,
        "chunk_size": log.geometry.chunk_size,
        "chunk_count": log.geometry.chunk_count,
        "pool_guid": log.guids.map(|g| g.0),
        "log_guid": log.guids.map(|g| g.1),
        "entries": log.entries.iter().map(entry_json).collect::<Vec<_>>(),
        "corrupt_headers": log.corrupt_headers.iter().map(|s| (s.chunk, s.offset)).collect::<Vec<_>>(),
        "synced_txg": synced,
        "replay": replays.map(|r| r.iter().map(replay_json).collect::<Vec<_>>()),
    })
}

fn print_text(log: &PoolLog, synced: Option<u64>, replays: Option<&[DatasetReplay]>) {
    println!(
        "region at offset {}: {} chunks of {} bytes",
        log.region_offset, log.geometry.chunk_count, log.geometry.chunk_size
    );
    if let Some((pool, vdev)) = log.guids {
        println!("pool GUID {pool}, log vdev GUID {vdev}");
    }
    println!(
        "{} entries (generation.id dataset txg type):",
        log.entries.len()
    );
    for e in &log.entries {
        let h = &e.header;
        let what = e.txtype.map_or("damaged body", txtype_name);
        println!(
            "  {}.{} objset {} txg {} {what} ({} bytes; chunk {} offset {})",
            h.position.gen, h.position.id, h.objset, h.txg, h.body_len, e.slot.chunk, e.slot.offset
        );
    }
    for s in &log.corrupt_headers {
        println!(
            "corrupt header: chunk {} offset {} (the rest of the chunk is lost)",
            s.chunk, s.offset
        );
    }
    let (Some(synced), Some(replays)) = (synced, replays) else {
        println!("replay: not predicted (give --pool-image or --synced-txg)");
        return;
    };
    println!(
        "replay after txg {synced} (datasets claim from txg {}):",
        synced + 1
    );
    if replays.is_empty() {
        println!("  no dataset has entries to replay");
    }
    for r in replays {
        let verdict = if r.kept {
            "kept until abandoned"
        } else {
            "replayed"
        };
        println!(
            "  objset {}: {} entries replayed, {} lost; the log is {verdict}",
            r.objset,
            r.replayed.len(),
            r.lost.len()
        );
        for l in &r.lost {
            println!(
                "    lost {}.{} (txg {}, chunk {} offset {}): {}",
                l.position.gen,
                l.position.id,
                l.txg,
                l.slot.chunk,
                l.slot.offset,
                l.reason.describe()
            );
        }
    }
}
