//! One entry as one line of text (docs/reference/trace-format.md): `Display` writes it, `FromStr`
//! reads it.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use crate::entry::{Arg, Entry, FenceKind, FlushKind, Hypercall, Meta, Op, Task};

/// A line is not a valid entry; Display says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseEntryError(String);

impl From<String> for ParseEntryError {
    fn from(s: String) -> Self {
        ParseEntryError(s)
    }
}

const KINDS: &str =
    "write, ntwrite, read, flush, fence, hypercall, blkwrite, blkread, blkflush, call or return";

impl FromStr for Entry {
    type Err = ParseEntryError;

    /// Parses one entry line; a trailing `# comment` is allowed.
    fn from_str(line: &str) -> Result<Entry, ParseEntryError> {
        let body = line.split_once('#').map_or(line, |(body, _)| body);
        let (op_text, meta_text) = match body.split_once('@') {
            Some((op, meta)) => (op, Some(meta)),
            None => (body, None),
        };
        let mut words = op_text.split_whitespace();
        let kind = words
            .next()
            .ok_or_else(|| "expected an entry, found nothing".to_owned())?;
        let op = parse_op(kind, &mut words)?;
        if let Some(extra) = words.next() {
            return Err(format!("unexpected `{extra}` after the `{kind}` entry").into());
        }
        let meta = meta_text.map(parse_meta).transpose()?.unwrap_or_default();
        let entry = Entry { op, meta };
        entry.validate()?;
        Ok(entry)
    }
}

fn parse_op<'a>(kind: &str, words: &mut impl Iterator<Item = &'a str>) -> Result<Op, String> {
    if kind == "call" {
        let name = words.next().ok_or("`call` is missing its function name")?;
        return Ok(Op::Call {
            name: name.to_owned(),
            args: words.map(parse_arg).collect::<Result<_, _>>()?,
        });
    }
    if kind == "return" {
        let name = words
            .next()
            .ok_or("`return` is missing its function name")?;
        let value = words.next().ok_or("`return` is missing its value")?;
        return Ok(Op::Return {
            name: name.to_owned(),
            value: parse_arg(value)?,
        });
    }
    let mut next = |what: &str| {
        words
            .next()
            .ok_or_else(|| format!("`{kind}` is missing its {what}"))
    };
    Ok(match kind {
        "write" | "ntwrite" => Op::Write {
            addr: parse_number(next("address")?)?,
            data: parse_hex_bytes(next("bytes")?)?,
            nt: kind == "ntwrite",
        },
        "read" => Op::Read {
            addr: parse_number(next("address")?)?,
            size: parse_number(next("size")?)?,
        },
        "flush" => Op::Flush {
            kind: match next("kind")? {
                "clwb" => FlushKind::Clwb,
                "clflushopt" => FlushKind::Clflushopt,
                "clflush" => FlushKind::Clflush,
                other => {
                    return Err(format!(
                        "unknown flush kind `{other}`; expected clwb, clflushopt or clflush"
                    ))
                }
            },
            addr: parse_number(next("address")?)?,
        },
        "fence" => Op::Fence(match next("kind")? {
            "sfence" => FenceKind::Sfence,
            "mfence" => FenceKind::Mfence,
            "locked" => FenceKind::Locked,
            "serializing" => FenceKind::Serializing,
            "interrupt" => FenceKind::Interrupt,
            other => {
                return Err(format!(
                    "unknown fence kind `{other}`; expected sfence, mfence, locked or serializing"
                ))
            }
        }),
        "hypercall" => Op::Hypercall(match next("kind")? {
            "start" => Hypercall::Start,
            "checkpoint" => Hypercall::Checkpoint(parse_number(next("number")?)?),
            "success" => Hypercall::Success,
            "fail" => Hypercall::Fail,
            "volatile" => Hypercall::Volatile {
                addr: parse_number(next("address")?)?,
                len: parse_number(next("size")?)?,
            },
            other => {
                return Err(format!(
                    "unknown hypercall `{other}`; expected start, checkpoint N, success, fail \
                     or volatile ADDR SIZE"
                ))
            }
        }),
        "blkwrite" => Op::BlkWrite {
            offset: parse_number(next("offset")?)?,
            data: parse_hex_bytes(next("bytes")?)?,
        },
        "blkread" => Op::BlkRead {
            offset: parse_number(next("offset")?)?,
            size: parse_number(next("size")?)?,
        },
        "blkflush" => Op::BlkFlush,
        other => return Err(format!("unknown entry kind `{other}`; expected {KINDS}")),
    })
}

/// `pm:OFFSET` (an address in PM) or a register's value.
fn parse_arg(text: &str) -> Result<Arg, String> {
    match text.strip_prefix("pm:") {
        Some(offset) => Ok(Arg::Pm(parse_number(offset)?)),
        None => Ok(Arg::Value(parse_number(text)?)),
    }
}

/// `key=value` pairs; unknown keys are skipped so that newer tracers can add keys.
fn parse_meta(text: &str) -> Result<Meta, String> {
    let mut meta = Meta::default();
    let mut task = None;
    for pair in text.split_whitespace() {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("metadata `{pair}` is not of the form key=value"))?;
        match key {
            "pc" => meta.pc = Some(parse_number(value)?),
            "stack" => {
                meta.stack = value
                    .split(',')
                    .filter(|frame| !frame.is_empty())
                    .map(parse_number)
                    .collect::<Result<_, _>>()?
            }
            "pid" => task.get_or_insert_with(Task::default).pid = parse_id(key, value)?,
            "tid" => task.get_or_insert_with(Task::default).tid = parse_id(key, value)?,
            "comm" => task.get_or_insert_with(Task::default).comm = unescape_comm(value)?,
            _ => {}
        }
    }
    meta.task = task;
    Ok(meta)
}

fn parse_id(key: &str, value: &str) -> Result<u32, String> {
    u32::try_from(parse_number(value)?).map_err(|_| format!("{key}={value} is not a 32-bit id"))
}

/// Whether a task name's byte stands for itself in the text form: printable ASCII other
/// than the characters that end a name (`%` escapes, `#` comments, `@` metadata).
fn plain_comm_byte(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'%' | b'#' | b'@')
}

/// A task name with every other byte as `%XX`: names may hold spaces and any UTF-8.
fn write_comm(f: &mut fmt::Formatter<'_>, comm: &str) -> fmt::Result {
    for &b in comm.as_bytes() {
        if plain_comm_byte(b) {
            f.write_char(char::from(b))?;
        } else {
            write!(f, "%{b:02X}")?;
        }
    }
    Ok(())
}

fn unescape_comm(text: &str) -> Result<String, String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = tail
                .get(..2)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("comm={text}: `%` is not followed by two hex digits"))?;
            bytes.push(hex);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).map_err(|_| format!("comm={text} is not UTF-8"))
}

/// A number in hex with `0x`, or in decimal.
pub(crate) fn parse_number(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not a 64-bit number (hex with 0x, or decimal)"))
}

fn parse_hex_bytes(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!(
            "bytes `{text}` have an odd number of hex digits; write two digits per byte"
        ));
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| format!("bytes `{text}` are not hex digits (two per byte, no 0x)"))
}

fn write_hex_bytes(f: &mut fmt::Formatter<'_>, data: &[u8]) -> fmt::Result {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Converting in chunks keeps block writes of megabytes from costing a call per byte.
    let mut buf = [0u8; 128];
    for chunk in data.chunks(buf.len() / 2) {
        for (i, b) in chunk.iter().enumerate() {
            buf[2 * i] = DIGITS[usize::from(b >> 4)];
            buf[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
        }
        let text = std::str::from_utf8(&buf[..2 * chunk.len()]).map_err(|_| fmt::Error)?;
        f.write_str(text)?;
    }
    Ok(())
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Write { addr, data, nt } => {
                write!(f, "{} {addr:#x} ", if *nt { "ntwrite" } else { "write" })?;
                write_hex_bytes(f, data)
            }
            Op::Read { addr, size } => write!(f, "read {addr:#x} {size}"),
            Op::Flush { kind, addr } => {
                let kind = match kind {
                    FlushKind::Clwb => "clwb",
                    FlushKind::Clflushopt => "clflushopt",
                    FlushKind::Clflush => "clflush",
                };
                write!(f, "flush {kind} {addr:#x}")
            }
            Op::Fence(kind) => write!(f, "fence {}", kind.name()),
            Op::Hypercall(Hypercall::Start) => f.write_str("hypercall start"),
            Op::Hypercall(Hypercall::Checkpoint(n)) => write!(f, "hypercall checkpoint {n}"),
            Op::Hypercall(Hypercall::Success) => f.write_str("hypercall success"),
            Op::Hypercall(Hypercall::Fail) => f.write_str("hypercall fail"),
            Op::Hypercall(Hypercall::Volatile { addr, len }) => {
                write!(f, "hypercall volatile {addr:#x} {len:#x}")
            }
            Op::BlkWrite { offset, data } => {
                write!(f, "blkwrite {offset:#x} ")?;
                write_hex_bytes(f, data)
            }
            Op::BlkRead { offset, size } => write!(f, "blkread {offset:#x} {size}"),
            Op::BlkFlush => f.write_str("blkflush"),
            Op::Call { name, args } => {
                write!(f, "call {name}")?;
                args.iter().try_for_each(|arg| write!(f, " {arg}"))
            }
            Op::Return { name, value } => write!(f, "return {name} {value}"),
        }
    }
}

impl fmt::Display for Arg {
    /// `pm:OFFSET` for an address in PM, else the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Value(v) => write!(f, "{v:#x}"),
            Arg::Pm(offset) => write!(f, "pm:{offset:#x}"),
        }
    }
}

impl fmt::Display for Meta {
    /// `pc=0x.. stack=0x..,0x.. pid=N tid=N comm=NAME`, leaving out what is absent.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(pc) = self.pc {
            write!(f, "pc={pc:#x}")?;
            sep = " ";
        }
        if !self.stack.is_empty() {
            write!(f, "{sep}stack=")?;
            for (i, frame) in self.stack.iter().enumerate() {
                if i > 0 {
                    f.write_char(',')?;
                }
                write!(f, "{frame:#x}")?;
            }
            sep = " ";
        }
        if let Some(task) = &self.task {
            write!(f, "{sep}pid={} tid={} comm=", task.pid, task.tid)?;
            write_comm(f, &task.comm)?;
        }
        Ok(())
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.op)?;
        if !self.meta.is_empty() {
            write!(f, " @ {}", self.meta)?;
        }
        Ok(())
    }
}
