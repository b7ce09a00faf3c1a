//! `zil-pmem-tool`: drives persim-zil-pmem's key-value consumer across media, for the
//! `zil-pmem` suite (suites/zil-pmem, vm/zil-pmem.toml): the store in a file on the NVMe
//! SSD (committed per txg with fdatasync), its log in a file on a DAX file system on PM
//! (mapped with MAP_SYNC). It formats both, makes logged puts with hypercall checkpoints
//! around each, and recovers (claim and replay) printing the map as JSON (the state Persim
//! compares across crash images).

use persim_guest::command_line::parse_or_exit;
use persim_guest::hypercall::{call, Operation};
use persim_ringbuf::{dispatch, AccessKind, AccessVisitor, PmAccess};
use persim_subjects::dax::{create_mapped, map_file, SyncMapping};
use persim_subjects::options::Options;
use persim_zil_pmem::kv::{KvError, KvStore, Recovery};
use persim_zil_pmem::{ReplayError, SUPERBLOCK_SPACE};
use serde_json::{json, Map, Value};
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "\
usage: zil-pmem-tool format STORE LOG --chunk-size BYTES --chunks N
       zil-pmem-tool put STORE LOG --count N --value-len BYTES [--first K] [--every E]
                     [--checkpoints] [--access KIND]
       zil-pmem-tool recover STORE LOG [--stop-after N] [--checkpoints] [--check]
                     [--access KIND]

STORE is the key-value store's file (on any file system: the NVMe SSD), LOG the file of
its ZIL-PMEM log on a file system mounted with -o dax (mapped with MAP_SYNC).
  format    create STORE as an empty store and LOG as an empty log of N chunks
  put       recover, then make N puts: put k (k from K, default 1) stores
            BYTES times the letter A + (k - 1) mod 26 under the key put-kkkk, logged on
            PM and acknowledged when durable; every E puts (default 8) commit a txg to
            STORE (write, fdatasync, commit record, fdatasync), which frees the log's
            chunks; --checkpoints: `hypercall checkpoint j` before the j-th put and
            `checkpoint N+1` after the last, so that the j-th put is interval j -> j+1
  recover   claim the log and replay its entries into STORE (the last committed txg plus
            the log), then print the map as JSON:
            {\"map\": {\"put-0001\": {\"len\": 100, \"crc32c\": \"0x...\", \"head\": \"AAAA...\"}, ...}}
            or {\"damage\": \"...\"} and exit 3 when recovery refuses: a body that fails its
            checksum, a missing dependency, an unreadable log or store;
            --stop-after N: fail replay after N entries, as a crash there would, and print
            {\"interrupted_after\": N}; --checkpoints: checkpoints 1 and 2 around recovery;
            --check: also check the log's chunks, which the map cannot show (a state
            command's check): no chunk holds an entry of its earlier use after a newer
            one, and a restart after the recovery finds every chunk free (its txg commit
            freed them); else damage
  --access  how stores reach PM: nt-avx512, nt-avx2, nt-sse2, clwb, clflushopt, clflush,
            eadr (default: the widest non-temporal stores this CPU has)
  -h, --help  print this help

exit status: 0 done, 1 a file or the log failed, 2 bad command line, 3 recover found
damage (named on stderr)";

/// The options that take a value; the flags are `FLAGS`.
const VALUED: [&str; 8] = [
    "chunk-size",
    "chunks",
    "count",
    "value-len",
    "first",
    "every",
    "stop-after",
    "access",
];
const FLAGS: [&str; 2] = ["checkpoints", "check"];
/// Puts per txg unless `--every` says otherwise.
const DEFAULT_EVERY: usize = 8;
/// The store's pool and log GUIDs: fixed, so that every run writes the same bytes.
const GUIDS: (u64, u64) = (0x5045_5253_494d_0001, 0x5045_5253_494d_0002);
/// Value bytes shown in the state, enough to tell the puts' letters apart.
const HEAD: usize = 16;
/// The exit status of `recover` when it finds damage, so that whoever runs it (a state
/// command under `persim faults`) sees a failure, not just a different state.
const DAMAGE: u8 = 3;

fn main() -> ExitCode {
    let command = match parse_or_exit("zil-pmem-tool", USAGE, Command::parse) {
        Ok(command) => command,
        Err(code) => return code,
    };
    let access = command.access;
    match dispatch(access, command)
        .map_err(|e| e.to_string())
        .and_then(|done| done)
    {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(damage)) => {
            println!("{}", json!({ "damage": damage }));
            eprintln!("zil-pmem-tool: recovery found damage: {damage}");
            ExitCode::from(DAMAGE)
        }
        Err(message) => {
            eprintln!("zil-pmem-tool: {message}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, PartialEq)]
struct Command {
    store: String,
    log: String,
    job: Job,
    access: AccessKind,
}

#[derive(Debug, PartialEq)]
enum Job {
    Format {
        chunk_size: usize,
        chunks: usize,
    },
    Put {
        count: usize,
        value_len: usize,
        first: usize,
        every: usize,
        checkpoints: bool,
    },
    Recover {
        stop_after: Option<usize>,
        checkpoints: bool,
        check: bool,
    },
}

impl Command {
    /// The command on the command line, or `None` for `--help`.
    fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Command>, String> {
        let Some((words, mut options)) = Options::parse(args, &VALUED, &FLAGS)? else {
            return Ok(None);
        };
        let (verb, store, log) = match <[String; 3]>::try_from(words) {
            Ok([verb, store, log]) => (verb, store, log),
            Err(words) if words.len() < 3 => {
                return Err("give a command, the STORE file and the LOG file".into())
            }
            Err(words) => return Err(format!("unexpected argument `{}`", words[3])),
        };
        let job = match verb.as_str() {
            "format" => Job::Format {
                chunk_size: options.number("--chunk-size")?,
                chunks: options.number("--chunks")?,
            },
            "put" => Job::Put {
                count: options.number("--count")?,
                value_len: options.number("--value-len")?,
                first: match options.optional_number("--first")? {
                    Some(0) => return Err("--first counts puts from 1".into()),
                    first => first.unwrap_or(1),
                },
                every: options.optional_number("--every")?.unwrap_or(DEFAULT_EVERY),
                checkpoints: options.flag("--checkpoints"),
            },
            "recover" => Job::Recover {
                stop_after: options.optional_number("--stop-after")?,
                checkpoints: options.flag("--checkpoints"),
                check: options.flag("--check"),
            },
            other => return Err(format!("unknown command `{other}`")),
        };
        let access = options.access()?;
        options.finish()?;
        Ok(Some(Command {
            store,
            log,
            job,
            access,
        }))
    }
}

impl AccessVisitor for Command {
    /// For `recover`, the damage it found, if any.
    type Output = Result<Option<String>, String>;
    fn visit<A: PmAccess + 'static>(self, access: A) -> Self::Output {
        let store = Path::new(&self.store);
        match self.job {
            Job::Format { chunk_size, chunks } => {
                let len = chunk_size
                    .checked_mul(chunks)
                    .and_then(|n| n.checked_add(SUPERBLOCK_SPACE))
                    .ok_or("--chunk-size times --chunks is too large")?;
                let region = create_mapped(&self.log, len)?;
                KvStore::create(store, region, access, chunk_size, DEFAULT_EVERY, GUIDS)
                    .map_err(|e| format!("format: {e}"))?;
                Ok(None)
            }
            Job::Put {
                count,
                value_len,
                first,
                every,
                checkpoints,
            } => {
                let region = map_file(&self.log)?;
                let (mut kv, _) = KvStore::recover(store, region, access, every, None)
                    .map_err(|e| format!("recover before the puts: {e}"))?;
                let checkpoint = |n: usize| {
                    if checkpoints {
                        call(Operation::Checkpoint(n as u64));
                    }
                };
                for j in 0..count {
                    let (key, value) = put(first + j, value_len);
                    checkpoint(j + 1);
                    kv.put(key.as_bytes(), &value)
                        .map_err(|e| format!("put {key}: {e}"))?;
                }
                checkpoint(count + 1);
                Ok(None)
            }
            Job::Recover {
                stop_after,
                checkpoints,
                check,
            } => {
                let region = match map_file(&self.log) {
                    Ok(region) => region,
                    Err(e) => return Ok(Some(e)),
                };
                if checkpoints {
                    call(Operation::Checkpoint(1));
                }
                let recovered = KvStore::<SyncMapping, A>::recover(
                    store,
                    region,
                    access,
                    DEFAULT_EVERY,
                    stop_after,
                );
                if checkpoints {
                    call(Operation::Checkpoint(2));
                }
                let recovered = match recovered {
                    Ok((kv, first)) if check => restart_damage(store, kv, &first),
                    recovered => recovered.map(|(kv, _)| Ok(kv)),
                };
                match recovered {
                    Ok(Ok(kv)) => {
                        println!("{}", map_json(kv.map()));
                        Ok(None)
                    }
                    Ok(Err(damage)) => Ok(Some(damage)),
                    Err(KvError::Interrupted(n)) => {
                        println!("{}", json!({ "interrupted_after": n }));
                        Ok(None)
                    }
                    Err(KvError::Io(e)) => Err(format!("the store: {e}")),
                    Err(KvError::Replay(ReplayError::Consumer { entry, error })) => {
                        Err(format!("replaying entry {entry:?} into the store: {error}"))
                    }
                    Err(damage) => Ok(Some(damage.to_string())),
                }
            }
        }
    }
}

/// `recover --check`: recovers `kv` again, as a restart would, and returns it, or what
/// its chunks show wrong.
fn restart_damage<A: PmAccess>(
    store: &Path,
    kv: KvStore<SyncMapping, A>,
    first: &Recovery,
) -> Result<Result<KvStore<SyncMapping, A>, String>, KvError> {
    let (region, access) = kv.stop();
    let (kv, second) = KvStore::recover(store, region, access, DEFAULT_EVERY, None)?;
    Ok(if let Some(chunk) = first.mixed_chunks.first() {
        Err(format!(
            "chunk {chunk} holds an entry of its earlier use after a newer one (its next \
             header was not zeroed)"
        ))
    } else if second.chunks_in_use > 0 {
        Err(format!(
            "{} chunks are in use at a restart after a finished recovery, whose txg commit \
             freed them (a freed chunk's first header was not zeroed)",
            second.chunks_in_use
        ))
    } else {
        Ok(kv)
    })
}

/// Put `k`'s key and value.
fn put(k: usize, value_len: usize) -> (String, Vec<u8>) {
    let letter = b'A' + ((k - 1) % 26) as u8;
    (format!("put-{k:04}"), vec![letter; value_len])
}

/// The map as JSON: per key its value's length, CRC32C and first bytes.
fn map_json<'a>(map: impl IntoIterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>) -> Value {
    let entries: Map<String, Value> = map
        .into_iter()
        .map(|(key, value)| {
            let head = &value[..value.len().min(HEAD)];
            let value = json!({
                "len": value.len(),
                "crc32c": format!("{:#010x}", crc32c::crc32c(value)),
                "head": String::from_utf8_lossy(head),
            });
            (String::from_utf8_lossy(key).into_owned(), value)
        })
        .collect();
    json!({ "map": entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_guest::command_line::words;

    fn parse(line: &str) -> Result<Command, String> {
        Command::parse(words(line)).map(|command| command.expect("a command, not --help"))
    }

    #[test]
    fn commands_parse_with_their_options_in_any_order() {
        let put = parse("put s l --checkpoints --value-len 100 --every 3 --count 5 --access clwb");
        assert_eq!(
            put,
            Ok(Command {
                store: "s".into(),
                log: "l".into(),
                job: Job::Put {
                    count: 5,
                    value_len: 100,
                    first: 1,
                    every: 3,
                    checkpoints: true,
                },
                access: AccessKind::Clwb,
            })
        );
        let recover = parse("recover s l --stop-after=2 --access eadr").unwrap();
        assert_eq!(
            recover.job,
            Job::Recover {
                stop_after: Some(2),
                checkpoints: false,
                check: false,
            }
        );
        let recover = parse("recover s l --check").unwrap();
        assert_eq!(
            recover.job,
            Job::Recover {
                stop_after: None,
                checkpoints: false,
                check: true,
            }
        );
        let format = parse("format s l --chunks 4 --chunk-size 1024").unwrap();
        assert_eq!(
            format.job,
            Job::Format {
                chunk_size: 1024,
                chunks: 4,
            }
        );
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let error = |line| parse(line).unwrap_err();
        assert!(error("put s l --count 3").contains("--value-len"));
        assert!(error("put s l --count x --value-len 1").contains("`x`"));
        assert!(error("recover s l --count 3").contains("unknown option `--count`"));
        assert!(error("recover s l --access avx9").contains("avx9"));
        assert!(error("shrink s l").contains("unknown command"));
        assert!(error("recover s").contains("LOG"));
        assert!(error("recover s l m").contains("unexpected argument `m`"));
        assert!(error("recover s l --stop-after").contains("--stop-after needs a value"));
        assert!(error("put s l --count 1 --value-len 1 --first 0").contains("from 1"));
        assert_eq!(Command::parse(words("put --help")), Ok(None));
    }

    #[test]
    fn puts_are_numbered_from_one_and_lettered_from_a() {
        assert_eq!(put(1, 3), ("put-0001".to_owned(), b"AAA".to_vec()));
        assert_eq!(put(27, 1), ("put-0027".to_owned(), b"A".to_vec()));
        let map = std::collections::BTreeMap::from([(b"put-0002".to_vec(), vec![b'B'; 20])]);
        assert_eq!(
            map_json(&map),
            json!({ "map": { "put-0002": {
                "len": 20,
                "crc32c": format!("{:#010x}", crc32c::crc32c(&[b'B'; 20])),
                "head": "BBBBBBBBBBBBBBBB",
            } } })
        );
    }
}
