//! `ringbuf-tool`: drives a persim-ringbuf log in a file on a DAX file system, for the
//! `ringbuf` suite (suites/ringbuf): format it, append entries with hypercall checkpoints
//! around each append, release chunks, and print what recovery finds as JSON (the state
//! Persim compares across crash images).

use persim_guest::command_line::parse_or_exit;
use persim_guest::hypercall::{call, Operation};
use persim_ringbuf::{
    dispatch, AccessKind, AccessVisitor, CorruptEntry, PmAccess, RingBuf, Strategy,
    SUPERBLOCK_SPACE,
};
use persim_subjects::dax::{create_mapped, map_file, SyncMapping};
use persim_subjects::options::Options;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::process::ExitCode;

const USAGE: &str = "\
usage: ringbuf-tool format FILE --chunk-size BYTES --chunks N
       ringbuf-tool append FILE --count N --body-len BYTES [--checkpoints] [--access KIND]
       ringbuf-tool release FILE --before ID [--access KIND]
       ringbuf-tool recover FILE

FILE lies on a file system mounted with -o dax; it is mapped with MAP_SYNC.
  format    create FILE as an empty log of N chunks (header alignment 256 bytes)
  append    append N entries; the k-th body (k from 0) is BYTES times the letter A + k mod 26;
            --checkpoints: `hypercall checkpoint k+1` before the k-th append and
            `checkpoint N+1` after the last, so that append k+1 is interval k+1 -> k+2
  release   release every full chunk whose entries all have ids below ID
  recover   print the entries recovery finds, in id order, as JSON:
            {\"entries\": [{\"id\": 1, \"len\": 100, \"crc32c\": \"0x...\", \"head\": \"AAAA\"},
                         {\"id\": 2, \"error\": \"body checksum mismatch\"}, ...]}
            or {\"open_error\": \"...\"} when the log does not open; exits 3 if it
            finds either (damage), naming it on stderr
  --access  how stores reach PM: nt-avx512, nt-avx2, nt-sse2, clwb, clflushopt, clflush,
            eadr (default: the widest non-temporal stores this CPU has)
  -h, --help  print this help

exit status: 0 done, 1 the log or FILE failed, 2 bad command line, 3 recover found
damage (the state is printed all the same)";

/// The options that take a value; `--checkpoints` is the one flag.
const VALUED: [&str; 6] = [
    "chunk-size",
    "chunks",
    "count",
    "body-len",
    "access",
    "before",
];

/// One committer: the tool appends from one thread.
const COMMITTERS: usize = 1;
/// Body bytes shown in the state, enough to tell the entries' letters apart.
const HEAD: usize = 16;
/// The exit status of `recover` when it finds damage, so that whoever runs it (a state
/// command under `persim faults`) sees a failure, not just a different state.
const DAMAGE: u8 = 3;

fn main() -> ExitCode {
    let command = match parse_or_exit("ringbuf-tool", USAGE, Command::parse) {
        Ok(command) => command,
        Err(code) => return code,
    };
    match command.run() {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(damage)) => {
            eprintln!("ringbuf-tool: recovery found damage: {damage}");
            ExitCode::from(DAMAGE)
        }
        Err(message) => {
            eprintln!("ringbuf-tool: {message}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, PartialEq)]
enum Command {
    Format {
        file: String,
        chunk_size: usize,
        chunks: usize,
    },
    Append {
        file: String,
        count: u64,
        body_len: usize,
        checkpoints: bool,
        access: AccessKind,
    },
    Release {
        file: String,
        before: u64,
        access: AccessKind,
    },
    Recover {
        file: String,
    },
}

impl Command {
    /// The command on the command line, or `None` for `--help`.
    fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Command>, String> {
        let Some((words, mut options)) = Options::parse(args, &VALUED, &["checkpoints"])? else {
            return Ok(None);
        };
        let (verb, file) = match <[String; 2]>::try_from(words) {
            Ok([verb, file]) => (verb, file),
            Err(words) if words.len() < 2 => return Err("give a command and a FILE".into()),
            Err(words) => return Err(format!("unexpected argument `{}`", words[2])),
        };
        let command = match verb.as_str() {
            "format" => Command::Format {
                file,
                chunk_size: options.number("--chunk-size")?,
                chunks: options.number("--chunks")?,
            },
            "append" => Command::Append {
                file,
                count: options.number("--count")?,
                body_len: options.number("--body-len")?,
                checkpoints: options.flag("--checkpoints"),
                access: options.access()?,
            },
            "release" => Command::Release {
                file,
                before: options.number("--before")?,
                access: options.access()?,
            },
            "recover" => Command::Recover { file },
            other => return Err(format!("unknown command `{other}`")),
        };
        options.finish()?;
        Ok(Some(command))
    }

    /// Does the job; for `recover`, the damage it found, if any.
    fn run(self) -> Result<Option<String>, String> {
        let (mapped, job, access) = match self {
            Command::Format {
                file,
                chunk_size,
                chunks,
            } => (
                create(&file, chunk_size, chunks)?,
                Job::Format { chunk_size, chunks },
                AccessKind::detect(Strategy::NonTemporal).map_err(|e| e.to_string())?,
            ),
            Command::Append {
                file,
                count,
                body_len,
                checkpoints,
                access,
            } => (
                map_file(&file)?,
                Job::Append {
                    count,
                    body_len,
                    checkpoints,
                },
                access,
            ),
            Command::Release {
                file,
                before,
                access,
            } => (map_file(&file)?, Job::Release { before }, access),
            Command::Recover { file } => {
                let state = recover_json(map_file(&file)?);
                println!("{state}");
                return Ok(damage(&state));
            }
        };
        dispatch(access, OnLog { mapped, job })
            .map_err(|e| e.to_string())?
            .map(|()| None)
    }
}

/// Opens the log formatted in the mapping.
fn open_log<A: PmAccess>(
    mapping: SyncMapping,
    access: A,
) -> Result<RingBuf<SyncMapping, A>, String> {
    RingBuf::open(mapping, access, COMMITTERS).map_err(|e| format!("open: {e}"))
}

/// Creates the file for a log of `chunks` chunks and maps it.
fn create(path: &str, chunk_size: usize, chunks: usize) -> Result<SyncMapping, String> {
    let len = chunk_size
        .checked_mul(chunks)
        .and_then(|n| n.checked_add(SUPERBLOCK_SPACE))
        .ok_or("--chunk-size times --chunks is too large")?;
    create_mapped(path, len)
}

/// What to do with the log once the access type is chosen.
enum Job {
    Format {
        chunk_size: usize,
        chunks: usize,
    },
    Append {
        count: u64,
        body_len: usize,
        checkpoints: bool,
    },
    Release {
        before: u64,
    },
}

/// A job on the log in a mapping, run with the access `dispatch` picks.
struct OnLog {
    mapped: SyncMapping,
    job: Job,
}

impl AccessVisitor for OnLog {
    type Output = Result<(), String>;
    fn visit<A: PmAccess + 'static>(self, access: A) -> Self::Output {
        match self.job {
            Job::Format { chunk_size, chunks } => {
                let log = RingBuf::<_, _>::format(self.mapped, access, chunk_size, COMMITTERS)
                    .map_err(|e| format!("format: {e}"))?;
                let count = log.geometry().chunk_count;
                if count != chunks {
                    return Err(format!("formatted {count} chunks, not {chunks}"));
                }
            }
            Job::Append {
                count,
                body_len,
                checkpoints,
            } => {
                let log = open_log(self.mapped, access)?;
                let checkpoint = |n: u64| {
                    if checkpoints {
                        call(Operation::Checkpoint(n));
                    }
                };
                for k in 0..count {
                    let body = vec![b'A' + (k % 26) as u8; body_len];
                    checkpoint(k + 1);
                    log.append(&body)
                        .map_err(|e| format!("append {}: {e}", k + 1))?;
                }
                checkpoint(count + 1);
            }
            Job::Release { before } => {
                open_log(self.mapped, access)?.release(before);
            }
        }
        Ok(())
    }
}

/// The state of the log as recovery sees it. Opening and recovering only read the region,
/// so the eADR access (no special instructions) serves for any log.
fn recover_json(mapped: SyncMapping) -> Value {
    match RingBuf::<_, _>::open(mapped, persim_ringbuf::Eadr, COMMITTERS) {
        Ok(mut log) => {
            json!({ "entries": log.recover().map(|item| entry_json(&item)).collect::<Vec<_>>() })
        }
        Err(e) => json!({ "open_error": e.to_string() }),
    }
}

/// What of a recovered state is damage: the open error, or the damaged entries (with an
/// `error`), as JSON; `None` for a log that recovered whole.
fn damage(state: &Value) -> Option<String> {
    if let Some(error) = state.get("open_error") {
        return Some(json!({ "open_error": error }).to_string());
    }
    let damaged: Vec<&Value> = state["entries"]
        .as_array()?
        .iter()
        .filter(|entry| entry.get("error").is_some())
        .collect();
    (!damaged.is_empty()).then(|| json!(damaged).to_string())
}

fn entry_json(item: &Result<persim_ringbuf::RecoveredEntry<'_>, CorruptEntry>) -> Value {
    match item {
        Ok(entry) => {
            let head = &entry.body[..entry.body.len().min(HEAD)];
            json!({
                "id": entry.id,
                "len": entry.body.len(),
                "crc32c": format!("{:#010x}", crc32c::crc32c(entry.body)),
                "head": String::from_utf8_lossy(head),
            })
        }
        // The kind of damage, not the checksums: every torn body would be a state of its own.
        Err(e) => {
            let error = match e {
                CorruptEntry::BodyChecksum { .. } => "body checksum mismatch",
                CorruptEntry::LengthOutOfChunk { .. } => "length runs past the chunk",
                CorruptEntry::DamagedHeader { .. } => "damaged header",
            };
            json!({ "id": e.id(), "error": error })
        }
    }
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
        assert_eq!(
            parse("append /mnt/log --checkpoints --body-len 100 --count 3 --access clwb"),
            Ok(Command::Append {
                file: "/mnt/log".into(),
                count: 3,
                body_len: 100,
                checkpoints: true,
                access: AccessKind::Clwb,
            })
        );
        assert_eq!(
            parse("format f --chunks 2 --chunk-size 1024"),
            Ok(Command::Format {
                file: "f".into(),
                chunk_size: 1024,
                chunks: 2,
            })
        );
        assert_eq!(
            parse("recover f"),
            Ok(Command::Recover { file: "f".into() })
        );
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let error = |line| parse(line).unwrap_err();
        assert!(error("append f --count 3").contains("--body-len"));
        assert!(error("append f --count x --body-len 1").contains("`x`"));
        assert!(error("recover f --count 3").contains("unknown option `--count`"));
        assert!(error("release f --before 1 --access avx9").contains("avx9"));
        assert!(error("shrink f").contains("unknown command"));
        assert!(error("recover").contains("FILE"));
        assert!(error("recover f g").contains("unexpected argument `g`"));
        assert!(error("recover f --frobnicate").contains("--frobnicate"));
        assert!(error("release f --before").contains("--before needs a value"));
        assert!(error("append f --count 1 --body-len 1 --checkpoints=yes").contains("yes"));
    }

    #[test]
    fn values_follow_a_space_or_equals_and_help_wins() {
        assert_eq!(
            parse("release f --before=4 --access=eadr"),
            Ok(Command::Release {
                file: "f".into(),
                before: 4,
                access: AccessKind::Eadr,
            })
        );
        let help = |line: &str| Command::parse(words(line));
        assert_eq!(help("append f --help"), Ok(None));
        assert_eq!(help("-h"), Ok(None));
    }

    #[test]
    fn entries_print_their_identity_and_damage_only_its_kind() {
        let body = b"AAAAAAAAAAAAAAAAAAAA";
        let ok = entry_json(&Ok(persim_ringbuf::RecoveredEntry { id: 7, body }));
        assert_eq!(
            ok,
            json!({
                "id": 7,
                "len": 20,
                "crc32c": format!("{:#010x}", crc32c::crc32c(body)),
                "head": "AAAAAAAAAAAAAAAA",
            })
        );
        assert!(ok["crc32c"].as_str().unwrap().starts_with("0x"));
        let torn = |computed| {
            entry_json(&Err(CorruptEntry::BodyChecksum {
                id: 3,
                chunk: 0,
                offset: 512,
                stored: 1,
                computed,
            }))
        };
        assert_eq!(
            torn(2).to_string(),
            r#"{"error":"body checksum mismatch","id":3}"#
        );
        assert_eq!(torn(2), torn(5), "one state whatever the torn bytes");
    }

    #[test]
    fn damage_is_an_open_error_or_a_damaged_entry_and_nothing_else() {
        let whole = entry_json(&Ok(persim_ringbuf::RecoveredEntry { id: 1, body: b"A" }));
        let damaged = entry_json(&Err(CorruptEntry::DamagedHeader {
            chunk: 0,
            offset: 256,
        }));
        assert_eq!(damage(&json!({ "entries": [] })), None);
        assert_eq!(damage(&json!({ "entries": [whole.clone()] })), None);
        assert_eq!(
            damage(&json!({ "entries": [whole, damaged] })).as_deref(),
            Some(r#"[{"error":"damaged header","id":null}]"#)
        );
        assert_eq!(
            damage(&json!({ "open_error": "corrupt superblock" })).as_deref(),
            Some(r#"{"open_error":"corrupt superblock"}"#)
        );
    }

    #[test]
    fn heads_escape_what_json_needs_escaped() {
        let body = b"a\"b\\c\nd\x01\xff";
        let entry = entry_json(&Ok(persim_ringbuf::RecoveredEntry { id: 1, body }));
        let text = entry.to_string();
        // Control characters as \u00XX; invalid UTF-8 as U+FFFD.
        assert!(
            text.contains("\"head\":\"a\\\"b\\\\c\\nd\\u0001\u{fffd}\""),
            "{text}"
        );
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["head"], "a\"b\\c\nd\u{1}\u{fffd}");
    }
}
