//! `pangolin-tool`: a linked list of Pangolin objects (targets/pangolin) in a pool file on
//! a DAX file system (mapped with MAP_SYNC), for `persim run` and `persim faults`. It
//! formats the pool, pushes nodes in transactions with hypercall checkpoints around each,
//! and recovers (log replay, scrub) printing the list as JSON (the state Persim compares
//! across crash images).

use persim_guest::command_line::parse_or_exit;
use persim_guest::hypercall::{call, Operation};
use persim_pangolin::{Geometry, Pool, TxError, PAGE};
use persim_ringbuf::{dispatch, AccessKind, AccessVisitor, PmAccess};
use persim_subjects::dax::{create_mapped, map_file, SyncMapping};
use persim_subjects::options::Options;
use serde_json::json;
use std::ffi::OsString;
use std::process::ExitCode;

const USAGE: &str = "\
usage: pangolin-tool format POOL --size BYTES [--chunk-size BYTES] [--rows N]
                     [--log-size BYTES] [--access KIND]
       pangolin-tool push POOL --count N --len BYTES [--checkpoints] [--access KIND]
       pangolin-tool recover POOL [--access KIND]

POOL is a file on a file system mounted with -o dax (mapped with MAP_SYNC).
  format    create POOL as an empty pool of BYTES (defaults: 256 KiB chunk rows, 100 rows
            a zone, 1 MiB log copies); its root holds the list's head and length
  push      N transactions, the k-th allocating a node of BYTES data bytes (k from the
            list's length + 1, every byte the letter A + (k - 1) mod 26) and making it the
            list's head; --checkpoints: `hypercall checkpoint k` before the k-th and
            `checkpoint N+1` after the last, so that transaction k is interval k -> k+1
  recover   open POOL (completing a transaction a crash interrupted), scrub it (verify
            every object, rebuild damaged ones from parity) and print the list as JSON:
            {\"length\": 2, \"nodes\": [{\"k\": 2, \"len\": 100, \"head\": \"BBBB\"}, ...]}
            or {\"damage\": \"...\"} and exit 3 when it cannot: an object parity cannot
            rebuild, an unreadable pool; what the scrub repaired is said on stderr and in
            the kernel log (/dev/kmsg), not in the state: a repaired pool prints the state
            it held
  --access  how stores reach PM: nt-avx512, nt-avx2, nt-sse2, clwb, clflushopt, clflush,
            eadr (default: the widest non-temporal stores this CPU has)
  -h, --help  print this help

exit status: 0 done, 1 the pool failed, 2 bad command line, 3 recover found damage";

const VALUED: [&str; 7] = [
    "size",
    "chunk-size",
    "rows",
    "log-size",
    "count",
    "len",
    "access",
];
const FLAGS: [&str; 1] = ["checkpoints"];
/// The exit status of `recover` when it finds damage it cannot repair.
const DAMAGE: u8 = 3;
/// Data bytes shown per node, enough to tell the letters apart.
const HEAD: usize = 4;
/// A node's data: the next node's id and its number k, then the letters.
const NODE_HEADER: usize = 16;

fn main() -> ExitCode {
    let command = match parse_or_exit("pangolin-tool", USAGE, Command::parse) {
        Ok(command) => command,
        Err(code) => return code,
    };
    match dispatch(command.access, command)
        .map_err(|e| e.to_string())
        .and_then(|done| done)
    {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(damage)) => {
            println!("{}", json!({ "damage": damage }));
            eprintln!("pangolin-tool: recovery found damage: {damage}");
            ExitCode::from(DAMAGE)
        }
        Err(message) => {
            eprintln!("pangolin-tool: {message}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, PartialEq)]
struct Command {
    pool: String,
    job: Job,
    access: AccessKind,
}

#[derive(Debug, PartialEq)]
enum Job {
    Format {
        geometry: Geometry,
    },
    Push {
        count: u64,
        len: u64,
        checkpoints: bool,
    },
    Recover,
}

impl Command {
    fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Command>, String> {
        let Some((words, mut options)) = Options::parse(args, &VALUED, &FLAGS)? else {
            return Ok(None);
        };
        let (verb, pool) = match <[String; 2]>::try_from(words) {
            Ok([verb, pool]) => (verb, pool),
            Err(words) if words.len() < 2 => return Err("give a command and the POOL file".into()),
            Err(words) => return Err(format!("unexpected argument `{}`", words[2])),
        };
        let job = match verb.as_str() {
            "format" => {
                let mut geometry = Geometry::new(options.number("--size")?);
                // One thread: one log lane.
                geometry.lanes = 1;
                geometry.chunk_size = options
                    .optional_number("--chunk-size")?
                    .unwrap_or(geometry.chunk_size);
                geometry.rows = options.optional_number("--rows")?.unwrap_or(geometry.rows);
                geometry.log_size = options
                    .optional_number("--log-size")?
                    .unwrap_or(geometry.log_size);
                Job::Format { geometry }
            }
            "push" => Job::Push {
                count: options.number("--count")?,
                len: options.number("--len")?,
                checkpoints: options.flag("--checkpoints"),
            },
            "recover" => Job::Recover,
            other => return Err(format!("unknown command `{other}`")),
        };
        let access = options.access()?;
        options.finish()?;
        Ok(Some(Command { pool, job, access }))
    }
}

impl AccessVisitor for Command {
    /// For `recover`, the damage it found, if any.
    type Output = Result<Option<String>, String>;
    fn visit<A: PmAccess + 'static>(self, access: A) -> Self::Output {
        match self.job {
            Job::Format { geometry } => {
                let len = usize::try_from(geometry.pool_len).map_err(|_| "--size is too large")?;
                if !geometry.pool_len.is_multiple_of(PAGE) {
                    return Err(format!("--size {len} is not a multiple of {PAGE}"));
                }
                let region = create_mapped(&self.pool, len)?;
                Pool::format(region, access, geometry, 16).map_err(|e| format!("format: {e}"))?;
                Ok(None)
            }
            Job::Push {
                count,
                len,
                checkpoints,
            } => {
                let mut pool =
                    Pool::open(map_file(&self.pool)?, access).map_err(|e| format!("open: {e}"))?;
                let first = list(&pool).map_err(|e| e.to_string())?.len() as u64 + 1;
                let checkpoint = |n: u64| {
                    if checkpoints {
                        call(Operation::Checkpoint(n));
                    }
                };
                for j in 0..count {
                    checkpoint(j + 1);
                    push(&mut pool, first + j, len)
                        .map_err(|e| format!("push {}: {e}", first + j))?;
                }
                checkpoint(count + 1);
                Ok(None)
            }
            Job::Recover => {
                let region = match map_file(&self.pool) {
                    Ok(region) => region,
                    Err(e) => return Ok(Some(e)),
                };
                let mut pool = match Pool::<SyncMapping, A>::open(region, access) {
                    Ok(pool) => pool,
                    Err(e) => return Ok(Some(e.to_string())),
                };
                let report = pool.scrub();
                // Opening the pool repairs a metadata copy or a bitmap before the scrub,
                // which then finds nothing: the pool's count says what either repaired.
                if pool.repairs() > 0 || !report.is_clean() {
                    report_repairs(&format!("{} repairs, scrub {report:?}", pool.repairs()));
                }
                if !report.lost.is_empty() {
                    return Ok(Some(format!("objects {:x?} are lost", report.lost)));
                }
                match list(&pool) {
                    Ok(nodes) => {
                        let nodes: Vec<_> = nodes
                            .iter()
                            .map(|(k, data)| {
                                json!({
                                    "k": k,
                                    "len": data.len() - NODE_HEADER,
                                    "head": String::from_utf8_lossy(&data[NODE_HEADER..][..HEAD.min(data.len() - NODE_HEADER)]),
                                })
                            })
                            .collect();
                        println!("{}", json!({ "length": nodes.len(), "nodes": nodes }));
                        Ok(None)
                    }
                    Err(e) => Ok(Some(e.to_string())),
                }
            }
        }
    }
}

/// Says what the scrub found on stderr and in the kernel log, where `persim faults` reads
/// that a fault was noticed (a repaired fault is `corrected`, not `masked`).
fn report_repairs(report: &str) {
    let line =
        format!("pangolin-tool: scrub found a checksum or parity mismatch and repaired: {report}");
    eprintln!("{line}");
    // Best effort: without /dev/kmsg only stderr says it.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .and_then(|mut kmsg| std::io::Write::write_all(&mut kmsg, kmsg_record(&line).as_bytes()));
}

/// `line` as one /dev/kmsg record: it must end with a newline, or the kernel keeps the
/// record open for a continuation and `dmesg` (where `persim faults` reads) never shows it.
fn kmsg_record(line: &str) -> String {
    format!("{}\n", line.trim_end())
}

/// One transaction: a new node k of `len` letters becomes the head; the root counts it.
fn push<A: PmAccess>(pool: &mut Pool<SyncMapping, A>, k: u64, len: u64) -> Result<(), TxError> {
    let root = pool.root();
    let mut tx = pool.begin();
    let head = u64::from_le_bytes(tx.read(root)?[..8].try_into().expect("8 bytes"));
    let node = tx.alloc(NODE_HEADER as u64 + len, 1)?;
    let data = tx.open(node)?;
    data[..8].copy_from_slice(&head.to_le_bytes());
    data[8..16].copy_from_slice(&k.to_le_bytes());
    data[NODE_HEADER..].fill(b'A' + ((k - 1) % 26) as u8);
    let root_data = tx.add_range(root, 0, 16)?;
    root_data[..8].copy_from_slice(&node.to_le_bytes());
    root_data[8..].copy_from_slice(&k.to_le_bytes());
    tx.commit()
}

/// The nodes from the head: (k, data). The root's count must match the nodes found.
fn list<A: PmAccess>(pool: &Pool<SyncMapping, A>) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let root = pool.get(pool.root()).map_err(|e| e.to_string())?;
    let word = |bytes: &[u8], at: usize| {
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    };
    let (mut next, count) = (word(root, 0), word(root, 8));
    let mut nodes = Vec::new();
    while next != 0 && nodes.len() as u64 <= count {
        let data = pool.get(next).map_err(|e| format!("node {next:#x}: {e}"))?;
        if data.len() < NODE_HEADER {
            return Err(format!("node {next:#x} has {} bytes", data.len()));
        }
        nodes.push((word(data, 8), data.to_vec()));
        next = word(data, 0);
    }
    if nodes.len() as u64 != count {
        return Err(format!(
            "the root counts {count} nodes, the list has {}",
            nodes.len()
        ));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Option<Command>, String> {
        Command::parse(args.split_whitespace().map(OsString::from))
    }

    #[test]
    fn a_kernel_log_record_ends_its_line() {
        assert_eq!(kmsg_record("repaired: 1"), "repaired: 1\n");
        assert_eq!(kmsg_record("repaired: 1\n"), "repaired: 1\n");
    }

    #[test]
    fn commands_parse_and_bad_ones_say_what_is_wrong() {
        let format = parse("format /pm/pool --size 8388608 --rows 4 --access eadr")
            .unwrap()
            .unwrap();
        let Job::Format { geometry } = format.job else {
            panic!("{format:?}")
        };
        assert_eq!(
            (geometry.pool_len, geometry.rows, geometry.chunk_size),
            (8 << 20, 4, 256 << 10)
        );
        assert_eq!(
            parse("push /pm/pool --count 3 --len 100 --checkpoints --access clwb")
                .unwrap()
                .unwrap()
                .job,
            Job::Push {
                count: 3,
                len: 100,
                checkpoints: true
            }
        );
        assert_eq!(
            parse("recover /pm/pool --access eadr")
                .unwrap()
                .unwrap()
                .job,
            Job::Recover
        );
        assert_eq!(parse("--help").unwrap(), None);
        assert!(parse("push /pm/pool --len 1 --access eadr")
            .unwrap_err()
            .contains("--count"));
        assert!(parse("recover").unwrap_err().contains("POOL"));
        assert!(parse("recover /pm/pool --count 1 --access eadr")
            .unwrap_err()
            .contains("--count"));
    }
}
