//! The operations of `fs-ops`: what a generated test runs, one exact system call each.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;

/// `fallocate` modes ACE draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Falloc {
    Allocate,
    KeepSize,
    PunchHole,
    ZeroRange,
    ZeroRangeKeepSize,
}

impl Falloc {
    const ALL: [(&'static str, Falloc); 5] = [
        ("allocate", Falloc::Allocate),
        ("keep-size", Falloc::KeepSize),
        ("punch-hole", Falloc::PunchHole),
        ("zero-range", Falloc::ZeroRange),
        ("zero-range-keep-size", Falloc::ZeroRangeKeepSize),
    ];

    fn flags(self) -> libc::c_int {
        match self {
            Falloc::Allocate => 0,
            Falloc::KeepSize => libc::FALLOC_FL_KEEP_SIZE,
            // punching a hole never changes the size: the kernel requires KEEP_SIZE with it
            Falloc::PunchHole => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            Falloc::ZeroRange => libc::FALLOC_FL_ZERO_RANGE,
            Falloc::ZeroRangeKeepSize => libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// open(O_CREAT|O_RDWR, 0644), the file kept open by the [`Process`] until `close`.
    Open(String),
    Close(String),
    Creat(String),
    Mkdir(String),
    Write {
        path: String,
        offset: u64,
        len: u64,
        tag: u8,
    },
    Falloc {
        path: String,
        mode: Falloc,
        offset: u64,
        len: u64,
    },
    Truncate {
        path: String,
        len: u64,
    },
    Link(String, String),
    Symlink(String, String),
    Rename(String, String),
    Unlink(String),
    Rmdir(String),
    Setxattr {
        path: String,
        name: String,
        value: String,
    },
    Removexattr {
        path: String,
        name: String,
    },
    Fsync(String),
    Fdatasync(String),
    Sync,
}

/// How many distinct byte patterns `write` has: its TAG is below this.
pub const TAGS: u8 = 26;

fn tag(word: &str) -> Result<u8, String> {
    number(word)
        .ok()
        .and_then(|t| u8::try_from(t).ok())
        .filter(|&t| t < TAGS)
        .ok_or_else(|| format!("`{word}` is not a write tag: give 0 to {}", TAGS - 1))
}

fn number(word: &str) -> Result<u64, String> {
    let parsed = match word.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => word.parse(),
    };
    parsed.map_err(|_| format!("`{word}` is not a number"))
}

impl Op {
    pub fn parse(words: &[String]) -> Result<Op, String> {
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        let s = |x: &str| x.to_owned();
        Ok(match w[..] {
            ["open", p] => Op::Open(s(p)),
            ["close", p] => Op::Close(s(p)),
            ["creat", p] => Op::Creat(s(p)),
            ["mkdir", p] => Op::Mkdir(s(p)),
            ["write", p, off, len] => Op::Write {
                path: s(p),
                offset: number(off)?,
                len: number(len)?,
                tag: 0,
            },
            ["write", p, off, len, t] => Op::Write {
                path: s(p),
                offset: number(off)?,
                len: number(len)?,
                tag: tag(t)?,
            },
            ["falloc", p, mode, off, len] => Op::Falloc {
                path: s(p),
                mode: Falloc::ALL
                    .iter()
                    .find(|(name, _)| *name == mode)
                    .map(|&(_, m)| m)
                    .ok_or_else(|| format!("unknown fallocate mode `{mode}`"))?,
                offset: number(off)?,
                len: number(len)?,
            },
            ["truncate", p, len] => Op::Truncate {
                path: s(p),
                len: number(len)?,
            },
            ["link", a, b] => Op::Link(s(a), s(b)),
            ["symlink", a, b] => Op::Symlink(s(a), s(b)),
            ["rename", a, b] => Op::Rename(s(a), s(b)),
            ["unlink", p] => Op::Unlink(s(p)),
            ["rmdir", p] => Op::Rmdir(s(p)),
            ["setxattr", p, name, value] => Op::Setxattr {
                path: s(p),
                name: s(name),
                value: s(value),
            },
            ["removexattr", p, name] => Op::Removexattr {
                path: s(p),
                name: s(name),
            },
            ["fsync", p] => Op::Fsync(s(p)),
            ["fdatasync", p] => Op::Fdatasync(s(p)),
            ["sync"] => Op::Sync,
            [] => return Err("give an operation".into()),
            _ => {
                return Err(format!(
                    "unknown operation or wrong arguments: `{}`",
                    w.join(" ")
                ))
            }
        })
    }
}

/// The bytes `write` with `tag` stores at `offset`: the letter number
/// (o + o / 512 + tag) mod 26 at file offset o, so a state shows which part of a file a
/// byte was written for and, by its tag, by which write (suites/README.md, "The bytes of
/// `fs-ops write`").
pub fn pattern(tag: u8, offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len)
        .map(|o| b'a' + ((o / 512 + o + u64::from(tag)) % u64::from(TAGS)) as u8)
        .collect()
}

fn c_string(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::other(format!("`{s}` contains a NUL byte")))
}

/// Runs the operation in a process of its own; the error names the call and its arguments.
pub fn run(op: &Op) -> Result<(), String> {
    Process::default().run(op)
}

/// A process that runs operations one after another: the files it opened (`open`) stay
/// open until `close`, and the operations on a path it holds open (`write`, `falloc`,
/// `truncate`, `fsync`, `fdatasync`) use that descriptor, so nothing closes a file between
/// two system calls of a test (`fs-ops calls`).
#[derive(Default)]
pub struct Process {
    open: HashMap<String, fs::File>,
}

impl Process {
    /// Runs `op`; the error names the call and its arguments.
    pub fn run(&mut self, op: &Op) -> Result<(), String> {
        self.call(op).map_err(|e| format!("{op:?}: {e}"))
    }

    /// The file at `path`: the one this process holds open, or opened for writing.
    fn file(&self, path: &str, work: impl FnOnce(&fs::File) -> io::Result<()>) -> io::Result<()> {
        match self.open.get(path) {
            Some(file) => work(file),
            None => work(&OpenOptions::new().write(true).open(path)?),
        }
    }

    fn call(&mut self, op: &Op) -> io::Result<()> {
        match op {
            Op::Open(p) => {
                self.open.insert(p.clone(), create(p, true)?);
                Ok(())
            }
            Op::Close(p) => match self.open.remove(p) {
                Some(file) => {
                    // close(2) itself, so that its error is the call's.
                    // SAFETY: the descriptor is owned here and not used after.
                    let rc =
                        unsafe { libc::close(std::os::unix::io::IntoRawFd::into_raw_fd(file)) };
                    if rc == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                }
                None => Err(io::Error::other(format!(
                    "{p} is not open: `open` it first"
                ))),
            },
            Op::Write {
                path,
                offset,
                len,
                tag,
            } => self.file(path, |f| {
                f.write_all_at(&pattern(*tag, *offset, *len), *offset)
            }),
            Op::Falloc {
                path,
                mode,
                offset,
                len,
            } => self.file(path, |f| {
                let (offset, len) = (*offset as libc::off_t, *len as libc::off_t);
                // SAFETY: a valid descriptor; fallocate only reads its integer arguments.
                let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode.flags(), offset, len) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            }),
            Op::Truncate { path, len } => self.file(path, |f| f.set_len(*len)),
            Op::Fsync(p) if self.open.contains_key(p) => self.file(p, fs::File::sync_all),
            Op::Fdatasync(p) if self.open.contains_key(p) => self.file(p, fs::File::sync_data),
            Op::Creat(p) => create(p, false).map(drop),
            Op::Mkdir(p) => fs::create_dir(p),
            Op::Link(a, b) => fs::hard_link(a, b),
            Op::Symlink(a, b) => std::os::unix::fs::symlink(a, b),
            Op::Rename(a, b) => fs::rename(a, b),
            Op::Unlink(p) => fs::remove_file(p),
            Op::Rmdir(p) => fs::remove_dir(p),
            Op::Setxattr { path, name, value } => xattr(path, name, Some(value)),
            Op::Removexattr { path, name } => xattr(path, name, None),
            Op::Fsync(p) => fs::File::open(p).and_then(|f| f.sync_all()),
            Op::Fdatasync(p) => fs::File::open(p).and_then(|f| f.sync_data()),
            Op::Sync => {
                // SAFETY: no arguments.
                unsafe { libc::sync() };
                Ok(())
            }
        }
    }
}

/// open(O_CREAT|O_WRONLY, 0644), or O_RDWR with `read`: the file is kept as it is.
fn create(path: &str, read: bool) -> io::Result<fs::File> {
    OpenOptions::new()
        .read(read)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
}

fn xattr(path: &str, name: &str, value: Option<&str>) -> io::Result<()> {
    let (p, n) = (c_string(path)?, c_string(name)?);
    // SAFETY: NUL-terminated strings and a buffer of the given length, all alive here.
    let rc = unsafe {
        match value {
            Some(v) => libc::setxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0),
            None => libc::removexattr(p.as_ptr(), n.as_ptr()),
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_every_operation_and_rejects_bad_ones() {
        assert_eq!(
            Op::parse(&words("write /mnt/foo 0x1000 17")),
            Ok(Op::Write {
                path: "/mnt/foo".into(),
                offset: 4096,
                len: 17,
                tag: 0
            })
        );
        assert_eq!(
            Op::parse(&words("write /mnt/foo 0 1 25")).map(|op| match op {
                Op::Write { tag, .. } => tag,
                _ => unreachable!(),
            }),
            Ok(25)
        );
        for bad in ["26", "-1", "x"] {
            let e = Op::parse(&words(&format!("write /f 0 1 {bad}"))).unwrap_err();
            assert!(
                e.contains(&format!("`{bad}`")) && e.contains("0 to 25"),
                "{e}"
            );
        }
        assert_eq!(
            Op::parse(&words("falloc /mnt/foo punch-hole 0 4096")).map(|op| match op {
                Op::Falloc { mode, .. } => mode,
                _ => unreachable!(),
            }),
            Ok(Falloc::PunchHole)
        );
        assert_eq!(Op::parse(&words("sync")), Ok(Op::Sync));
        assert!(Op::parse(&words("falloc /f sideways 0 1"))
            .unwrap_err()
            .contains("sideways"));
        assert!(Op::parse(&words("write /f x 1"))
            .unwrap_err()
            .contains("`x`"));
        assert!(Op::parse(&words("link /a"))
            .unwrap_err()
            .contains("link /a"));
        assert!(Op::parse(&[]).is_err());
    }

    #[test]
    fn write_tags_give_different_bytes_at_every_offset() {
        // tag 0 keeps the bytes of the untagged write: `abcd…`, a letter skipped every 512
        assert_eq!(pattern(0, 0, 4), b"abcd");
        assert_eq!(pattern(0, 511, 2), b"rt");
        assert_eq!(pattern(1, 0, 4), b"bcde");
        let (offset, len) = (3000, 9000);
        let all: Vec<Vec<u8>> = (0..TAGS).map(|t| pattern(t, offset, len)).collect();
        for (t, bytes) in all.iter().enumerate() {
            assert_eq!(*bytes, pattern(t as u8, offset, len), "deterministic");
            assert!(bytes.iter().all(u8::is_ascii_lowercase));
            // a byte names its write: the tag is (letter - o - o / 512) mod 26
            for (o, b) in (offset..).zip(bytes) {
                let decoded = (u64::from(b - b'a') + 52 - o % 26 - (o / 512) % 26) % 26;
                assert_eq!(decoded, t as u64, "offset {o}");
            }
            for other in &all[t + 1..] {
                assert!(bytes.iter().zip(other).all(|(a, b)| a != b));
            }
        }
        // the same tag and file offset give the same byte wherever the write begins
        assert_eq!(pattern(2, 100, 50)[10..], pattern(2, 110, 40)[..]);
    }

    #[test]
    fn operations_do_what_they_say_and_failures_name_the_call() {
        let dir = std::env::temp_dir().join(format!("fs-ops-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let at = |name: &str| dir.join(name).display().to_string();
        let ok = |line: String| run(&Op::parse(&words(&line)).unwrap()).unwrap();
        ok(format!("mkdir {}", at("")));
        ok(format!("creat {}", at("foo")));
        ok(format!("write {} 10 5", at("foo")));
        assert_eq!(fs::read(at("foo")).unwrap()[10..], pattern(0, 10, 5)[..]);
        ok(format!("write {} 11 2 3", at("foo")));
        assert_eq!(fs::read(at("foo")).unwrap()[11..13], pattern(3, 11, 2)[..]);
        ok(format!("falloc {} keep-size 0 8192", at("foo")));
        assert_eq!(fs::metadata(at("foo")).unwrap().len(), 15);
        ok(format!("falloc {} allocate 0 8192", at("foo")));
        assert_eq!(fs::metadata(at("foo")).unwrap().len(), 8192);
        ok(format!("truncate {} 3", at("foo")));
        ok(format!("link {} {}", at("foo"), at("bar")));
        ok(format!("rename {} {}", at("bar"), at("baz")));
        ok(format!("symlink foo {}", at("sym")));
        assert_eq!(fs::read_link(at("sym")).unwrap().to_str(), Some("foo"));
        ok(format!("fsync {}", at("baz")));
        ok(format!("unlink {}", at("baz")));
        let e = run(&Op::parse(&words(&format!("unlink {}", at("baz")))).unwrap()).unwrap_err();
        assert!(e.contains("Unlink") && e.contains("No such file"), "{e}");
        let e = run(&Op::parse(&words(&format!("rmdir {}", at("")))).unwrap()).unwrap_err();
        assert!(e.contains("Rmdir"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// `calls`: a file opened once is written and synced through its descriptor, which
    /// stays open (an unlinked file is still written), until `close`.
    #[test]
    fn a_process_keeps_its_files_open_between_calls() {
        let dir = std::env::temp_dir().join(format!("fs-ops-calls-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        let f = dir.join("f").display().to_string();
        let mut process = Process::default();
        let mut call = |line: String| process.run(&Op::parse(&words(&line)).unwrap());
        call(format!("open {f}")).unwrap();
        call(format!("write {f} 0 4 1")).unwrap();
        let kept = fs::File::open(&f).unwrap();
        call(format!("unlink {f}")).unwrap();
        // The path is gone; the process's descriptor still reaches the file.
        call(format!("write {f} 4 4 1")).unwrap();
        call(format!("fsync {f}")).unwrap();
        call(format!("close {f}")).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &kept, &mut bytes).unwrap();
        assert_eq!(bytes, pattern(1, 0, 8));
        let e = call(format!("close {f}")).unwrap_err();
        assert!(e.contains("is not open"), "{e}");
        assert!(
            call(format!("write {f} 0 1")).is_err(),
            "written without a descriptor"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
