//! `persim generate ace`: bounded sequences of file-system operations in the manner of ACE
//! (CrashMonkey, OSDI'18; Chipmunk, EuroSys'23), as test files. Every operation is drawn
//! from a small set over a small file set; the operations a sequence needs first (a
//! file must exist before it is linked) are inserted; as in the thesis, only the last
//! operation lies between checkpoints (shorter sequences cover the earlier ones), so the
//! rest run untraced in `setup`. Each operation is one exact system call of the static
//! guest tool `fs-ops`.

use crate::cases::TestCase;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Files and directories the operations work on, relative to the mount point.
const FILES: [&str; 4] = ["foo", "bar", "A/foo", "A/bar"];
const DIRS: [&str; 2] = ["A", "B"];
/// Bytes every file gets when a sequence first needs it with data.
const INITIAL_LEN: u64 = 8192;
/// The longest sequence: each of its writes gets its own `fs-ops write` tag, 1 to 25
/// (fs-ops has 26 byte patterns; 0 is the setup's).
pub const MAX_SEQ: usize = 25;

/// How a test runs its checked operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// One `fs-ops` command between two checkpoints, then `sync`.
    Operations,
    /// Its system calls in one process, a checkpoint after each (`calls`): what Chipmunk
    /// checks, for file systems that promise every call durable when it returns.
    Calls,
}

/// One operation with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AceOp {
    Creat(&'static str),
    Mkdir(&'static str),
    /// Path, offset, length and the tag that gives the write its own bytes: 0 for the
    /// data a sequence needs first, the operation's position (from 1) in the sequence.
    Write(&'static str, u64, u64, u8),
    Falloc(&'static str, &'static str, u64, u64),
    Truncate(&'static str, u64),
    Link(&'static str, &'static str),
    Unlink(&'static str),
    Rename(&'static str, &'static str),
    Symlink(&'static str, &'static str),
    Rmdir(&'static str),
    Setxattr(&'static str),
    Removexattr(&'static str),
    Fsync(&'static str),
}

const XATTR: &str = "user.persim";

impl fmt::Display for AceOp {
    /// The `fs-ops` command line, paths under /mnt.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AceOp::Creat(p) => write!(f, "fs-ops creat /mnt/{p}"),
            AceOp::Mkdir(p) => write!(f, "fs-ops mkdir /mnt/{p}"),
            AceOp::Write(p, off, len, 0) => write!(f, "fs-ops write /mnt/{p} {off} {len}"),
            AceOp::Write(p, off, len, tag) => {
                write!(f, "fs-ops write /mnt/{p} {off} {len} {tag}")
            }
            AceOp::Falloc(p, mode, off, len) => {
                write!(f, "fs-ops falloc /mnt/{p} {mode} {off} {len}")
            }
            AceOp::Truncate(p, len) => write!(f, "fs-ops truncate /mnt/{p} {len}"),
            AceOp::Link(a, b) => write!(f, "fs-ops link /mnt/{a} /mnt/{b}"),
            AceOp::Unlink(p) => write!(f, "fs-ops unlink /mnt/{p}"),
            AceOp::Rename(a, b) => write!(f, "fs-ops rename /mnt/{a} /mnt/{b}"),
            // a relative target, as a user would write it
            AceOp::Symlink(t, p) => write!(f, "fs-ops symlink {t} /mnt/{p}"),
            AceOp::Rmdir(p) => write!(f, "fs-ops rmdir /mnt/{p}"),
            AceOp::Setxattr(p) => write!(f, "fs-ops setxattr /mnt/{p} {XATTR} value"),
            AceOp::Removexattr(p) => write!(f, "fs-ops removexattr /mnt/{p} {XATTR}"),
            AceOp::Fsync(p) => write!(f, "fs-ops fsync /mnt/{p}"),
        }
    }
}

impl AceOp {
    /// The operation as the system calls of one process (`calls`): a call on a file's
    /// data opens the file, makes its call, and closes it, each on its own.
    fn calls(&self) -> Vec<String> {
        let op = self.to_string().replacen("fs-ops ", "", 1);
        let on_open = |p: &str| {
            vec![
                format!("open /mnt/{p}"),
                op.clone(),
                format!("close /mnt/{p}"),
            ]
        };
        match *self {
            AceOp::Creat(p) => vec![format!("open /mnt/{p}"), format!("close /mnt/{p}")],
            AceOp::Write(p, ..)
            | AceOp::Falloc(p, ..)
            | AceOp::Truncate(p, _)
            | AceOp::Fsync(p) => on_open(p),
            _ => vec![op],
        }
    }

    /// The operation at `position` (from 1) of a sequence: a write gets the position as
    /// its tag, so an overwrite changes the bytes it overwrites.
    fn at_position(&self, position: usize) -> AceOp {
        match *self {
            AceOp::Write(p, off, len, _) => AceOp::Write(
                p,
                off,
                len,
                u8::try_from(position).expect("sequences are at most MAX_SEQ long"),
            ),
            ref op => op.clone(),
        }
    }

    /// A short name for test names: `write-foo-0-4096` (without the tag, which the
    /// operation's position gives).
    fn slug(&self) -> String {
        let text = self.to_string().replace("/mnt/", "").replace(XATTR, "");
        let words: Vec<&str> = text.split_whitespace().skip(1).collect();
        words
            .join("-")
            .replace('/', "")
            .replace("--", "-")
            .trim_end_matches("-value")
            .to_owned()
    }
}

/// The bounded operation set, in a fixed order (test names depend on it).
pub fn operations(persistence: bool) -> Vec<AceOp> {
    let mut ops = Vec::new();
    ops.extend(FILES.iter().map(|&f| AceOp::Creat(f)));
    ops.extend(DIRS.iter().map(|&d| AceOp::Mkdir(d)));
    // overwrite, unaligned, a store across a cache line, across a page, an append
    let writes = [
        (0, 4096),
        (100, 3000),
        (60, 8),
        (4000, 200),
        (INITIAL_LEN, 4096),
    ];
    for f in ["foo", "A/foo"] {
        ops.extend(
            writes
                .iter()
                .map(|&(off, len)| AceOp::Write(f, off, len, 0)),
        );
    }
    for mode in ["allocate", "keep-size", "punch-hole", "zero-range"] {
        // inside the file and beyond its end
        for (off, len) in [(0, 4096), (INITIAL_LEN, 4096)] {
            ops.push(AceOp::Falloc("foo", mode, off, len));
        }
    }
    ops.extend([0, 2500, 4 * INITIAL_LEN].map(|len| AceOp::Truncate("foo", len)));
    ops.extend([
        AceOp::Link("foo", "bar"),
        AceOp::Link("foo", "A/bar"),
        AceOp::Link("A/foo", "bar"),
        AceOp::Link("A/foo", "A/bar"),
    ]);
    ops.extend(FILES.iter().map(|&f| AceOp::Unlink(f)));
    ops.extend([
        AceOp::Rename("foo", "bar"),
        AceOp::Rename("foo", "A/bar"),
        AceOp::Rename("A/foo", "bar"),
        AceOp::Rename("A", "B"),
    ]);
    ops.extend([AceOp::Symlink("foo", "bar"), AceOp::Symlink("foo", "A/bar")]);
    ops.extend(DIRS.iter().map(|&d| AceOp::Rmdir(d)));
    ops.extend(["foo", "A/foo"].map(AceOp::Setxattr));
    ops.extend(["foo", "A/foo"].map(AceOp::Removexattr));
    if persistence {
        ops.extend(["foo", "A/foo"].map(AceOp::Fsync));
    }
    ops
}

/// What exists, as a sequence is built: paths (files, directories, symlinks) and the
/// files with the extended attribute.
#[derive(Clone, Default)]
struct Namespace {
    files: BTreeMap<String, bool>,
    dirs: BTreeSet<String>,
    xattrs: BTreeSet<String>,
}

impl Namespace {
    fn exists(&self, p: &str) -> bool {
        self.files.contains_key(p) || self.dirs.contains(p)
    }

    fn parent(p: &str) -> Option<&str> {
        p.rsplit_once('/').map(|(dir, _)| dir)
    }

    fn children(&self, dir: &str) -> bool {
        let prefix = format!("{dir}/");
        self.files
            .keys()
            .chain(&self.dirs)
            .any(|p| p.starts_with(&prefix))
    }

    /// Appends to `out` what `p`'s parent needs to exist.
    fn need_parent(&mut self, p: &str, out: &mut Vec<AceOp>) -> Option<()> {
        if let Some(dir) = Self::parent(p) {
            if self.files.contains_key(dir) {
                return None;
            }
            if !self.dirs.contains(dir) {
                let dir = DIRS.iter().find(|d| **d == dir)?;
                self.apply(&AceOp::Mkdir(dir));
                out.push(AceOp::Mkdir(dir));
            }
        }
        Some(())
    }

    /// Appends to `out` what makes `p` an existing regular file with data.
    fn need_file(&mut self, p: &'static str, out: &mut Vec<AceOp>) -> Option<()> {
        if self.dirs.contains(p) {
            return None;
        }
        if !self.files.contains_key(p) {
            self.need_parent(p, out)?;
            for op in [AceOp::Creat(p), AceOp::Write(p, 0, INITIAL_LEN, 0)] {
                self.apply(&op);
                out.push(op);
            }
        }
        Some(())
    }

    /// The operations `op` needs first (appended to `out`), or None when it cannot run
    /// after what the sequence did (e.g. `mkdir A` when A exists).
    fn prepare(&mut self, op: &AceOp, out: &mut Vec<AceOp>) -> Option<()> {
        match *op {
            AceOp::Creat(p) => {
                if self.exists(p) {
                    return None;
                }
                self.need_parent(p, out)
            }
            AceOp::Mkdir(p) => (!self.exists(p)).then_some(()),
            AceOp::Write(p, ..)
            | AceOp::Falloc(p, ..)
            | AceOp::Truncate(p, _)
            | AceOp::Setxattr(p)
            | AceOp::Fsync(p) => self.need_file(p, out),
            AceOp::Removexattr(p) => {
                self.need_file(p, out)?;
                if !self.xattrs.contains(p) {
                    self.apply(&AceOp::Setxattr(p));
                    out.push(AceOp::Setxattr(p));
                }
                Some(())
            }
            AceOp::Link(a, b) => {
                if self.exists(b) {
                    return None;
                }
                self.need_file(a, out)?;
                self.need_parent(b, out)
            }
            // a symlink's target need not exist
            AceOp::Symlink(_, b) => {
                if self.exists(b) {
                    return None;
                }
                self.need_parent(b, out)
            }
            AceOp::Rename(a, b) if DIRS.contains(&a) => {
                if !self.dirs.contains(a) {
                    self.apply(&AceOp::Mkdir(DIRS.iter().find(|d| **d == a)?));
                    out.push(AceOp::Mkdir(DIRS.iter().find(|d| **d == a)?));
                }
                (!self.exists(b)).then_some(())
            }
            AceOp::Rename(a, b) => {
                self.need_file(a, out)?;
                if self.dirs.contains(b) {
                    return None;
                }
                self.need_parent(b, out)
            }
            AceOp::Unlink(p) => self.need_file(p, out),
            AceOp::Rmdir(p) => {
                if self.files.contains_key(p) || self.children(p) {
                    return None;
                }
                if !self.dirs.contains(p) {
                    self.apply(&AceOp::Mkdir(DIRS.iter().find(|d| **d == p)?));
                    out.push(AceOp::Mkdir(DIRS.iter().find(|d| **d == p)?));
                }
                Some(())
            }
        }
    }

    fn apply(&mut self, op: &AceOp) {
        let s = str::to_owned;
        match *op {
            AceOp::Creat(p) | AceOp::Symlink(_, p) => {
                self.files.insert(s(p), false);
            }
            AceOp::Link(_, b) => {
                self.files.insert(s(b), true);
            }
            AceOp::Mkdir(p) => {
                self.dirs.insert(s(p));
            }
            AceOp::Write(p, ..) => {
                self.files.insert(s(p), true);
            }
            AceOp::Unlink(p) => {
                self.files.remove(p);
                self.xattrs.remove(p);
            }
            AceOp::Rmdir(p) => {
                self.dirs.remove(p);
            }
            AceOp::Rename(a, b) if DIRS.contains(&a) => {
                self.dirs.remove(a);
                self.dirs.insert(s(b));
                let prefix = format!("{a}/");
                let moved: Vec<(String, bool)> = self
                    .files
                    .iter()
                    .filter(|(p, _)| p.starts_with(&prefix))
                    .map(|(p, d)| (p.clone(), *d))
                    .collect();
                for (p, data) in moved {
                    self.files.remove(&p);
                    self.files
                        .insert(format!("{b}/{}", &p[prefix.len()..]), data);
                }
            }
            AceOp::Rename(a, b) => {
                let data = self.files.remove(a).unwrap_or(false);
                self.files.insert(s(b), data);
                if self.xattrs.remove(a) {
                    self.xattrs.insert(s(b));
                }
            }
            AceOp::Setxattr(p) => {
                self.xattrs.insert(s(p));
            }
            AceOp::Removexattr(p) => {
                self.xattrs.remove(p);
            }
            AceOp::Falloc(..) | AceOp::Truncate(..) | AceOp::Fsync(_) => {}
        }
    }
}

/// A generated test: its name and contents.
pub struct AceTest {
    pub name: String,
    pub test: TestCase,
}

/// The test of one sequence, or None when the sequence cannot run (an operation whose
/// target already exists, a directory that is not empty).
pub fn test_of(number: usize, sequence: &[&AceOp], form: Form) -> Option<AceTest> {
    let mut ns = Namespace::default();
    let mut steps = Vec::new();
    let positioned: Vec<AceOp> = (1..)
        .zip(sequence)
        .map(|(i, op)| op.at_position(i))
        .collect();
    for op in &positioned {
        ns.prepare(op, &mut steps)?;
        ns.apply(op);
        steps.push(op.clone());
    }
    let (last, before) = steps.split_last()?;
    let slugs: Vec<String> = sequence.iter().map(|op| op.slug()).collect();
    let mut setup: Vec<String> = before.iter().map(AceOp::to_string).collect();
    setup.push("sync".to_owned());
    Some(AceTest {
        name: format!("seq{}-{number:05}-{}", sequence.len(), slugs.join("_")),
        test: TestCase {
            description: format!(
                "ACE seq{}: {}",
                sequence.len(),
                positioned
                    .iter()
                    .map(|op| op.to_string().replace("fs-ops ", ""))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            setup: setup.join("\n"),
            ops: match form {
                Form::Operations => vec![last.to_string()],
                Form::Calls => Vec::new(),
            },
            calls: match form {
                Form::Operations => Vec::new(),
                Form::Calls => last.calls(),
            },
            run: None,
            ignore: vec!["atime".to_owned()],
            state: None,
            invariant: Vec::new(),
            expect: Default::default(),
        },
    })
}

/// Every sequence of `len` (at most [`MAX_SEQ`]) operations of `ops` (`sample`: a seeded
/// sample of that many, for longer sequences), as tests in a fixed order; sequences that
/// cannot run are left out. The same arguments give the same tests with the same names.
pub fn generate(
    ops: &[AceOp],
    len: usize,
    sample: Option<(usize, u64)>,
    form: Form,
) -> Vec<AceTest> {
    let total = (ops.len() as u128).pow(len as u32);
    let numbers: Vec<u128> = match sample {
        None => (0..total).collect(),
        Some((n, seed)) => sample_numbers(total, n, seed),
    };
    numbers
        .into_iter()
        .filter_map(|number| {
            let mut rest = number;
            let mut sequence = Vec::with_capacity(len);
            for _ in 0..len {
                sequence.push(&ops[(rest % ops.len() as u128) as usize]);
                rest /= ops.len() as u128;
            }
            sequence.reverse();
            test_of(number as usize, &sequence, form)
        })
        .collect()
}

/// `n` distinct numbers below `total`, ascending, drawn from BLAKE3's output stream of
/// the seed (stable across versions and platforms, unlike a library RNG's default).
fn sample_numbers(total: u128, n: usize, seed: u64) -> Vec<u128> {
    let mut stream = blake3::Hasher::new()
        .update(b"persim ace sample")
        .update(&seed.to_le_bytes())
        .finalize_xof();
    let mut chosen = BTreeSet::new();
    while (chosen.len() as u128) < total.min(n as u128) {
        let mut bytes = [0u8; 16];
        stream.fill(&mut bytes);
        chosen.insert(u128::from_le_bytes(bytes) % total);
    }
    chosen.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(ops: &[AceOp]) -> Option<AceTest> {
        let refs: Vec<&AceOp> = ops.iter().collect();
        test_of(7, &refs, Form::Operations)
    }

    #[test]
    fn dependencies_come_first_and_only_the_last_operation_is_checked() {
        let t = seq(&[AceOp::Link("A/foo", "bar")]).unwrap();
        assert_eq!(t.name, "seq1-00007-link-Afoo-bar");
        assert_eq!(
            t.test.setup,
            "fs-ops mkdir /mnt/A\nfs-ops creat /mnt/A/foo\nfs-ops write /mnt/A/foo 0 8192\nsync"
        );
        assert_eq!(t.test.ops, ["fs-ops link /mnt/A/foo /mnt/bar"]);
        let t = seq(&[AceOp::Setxattr("foo"), AceOp::Removexattr("foo")]).unwrap();
        assert_eq!(t.test.ops, ["fs-ops removexattr /mnt/foo user.persim"]);
        assert!(t.test.setup.contains("setxattr /mnt/foo user.persim value"));
        // removing an attribute never set sets it first
        let t = seq(&[AceOp::Removexattr("A/foo")]).unwrap();
        assert!(t.test.setup.contains("setxattr /mnt/A/foo"));
    }

    #[test]
    fn each_write_of_a_sequence_has_its_own_tag() {
        let (first, second) = (
            AceOp::Write("foo", 0, 4096, 0),
            AceOp::Write("foo", 100, 3000, 0),
        );
        let t = seq(&[first.clone(), second.clone()]).unwrap();
        // names and the inserted data are those of untagged writes
        assert_eq!(t.name, "seq2-00007-write-foo-0-4096_write-foo-100-3000");
        assert_eq!(
            t.test.setup,
            "fs-ops creat /mnt/foo\nfs-ops write /mnt/foo 0 8192\n\
             fs-ops write /mnt/foo 0 4096 1\nsync"
        );
        assert_eq!(t.test.ops, ["fs-ops write /mnt/foo 100 3000 2"]);
        assert_eq!(
            t.test.description,
            "ACE seq2: write /mnt/foo 0 4096 1; write /mnt/foo 100 3000 2"
        );
        assert_eq!(
            seq(&[first]).unwrap().test.ops,
            ["fs-ops write /mnt/foo 0 4096 1"]
        );
        // every generated test: the data a sequence needs first has tag 0, each write of
        // the sequence its own other tag
        let ops = operations(true);
        for len in [1, 2] {
            for t in generate(&ops, len, None, Form::Operations) {
                let tag = |line: &str| match line.split_whitespace().collect::<Vec<_>>()[..] {
                    ["fs-ops", "write", _, "0", "8192"] => Some(0),
                    ["fs-ops", "write", _, _, _, tag] => Some(tag.parse::<usize>().unwrap()),
                    _ => None,
                };
                let setup: Vec<usize> = t.test.setup.lines().filter_map(tag).collect();
                let last = tag(&t.test.ops[0]);
                let writes = t.name.matches("write-").count();
                let tags: BTreeSet<usize> = setup.iter().copied().chain(last).collect();
                let own = tags.iter().filter(|&&tag| tag != 0).count();
                assert_eq!(own, writes, "{}: {setup:?} {last:?}", t.name);
                assert!(tags.iter().all(|&tag| tag <= len), "{}", t.name);
                assert!(last.is_none_or(|tag| tag == len), "{}", t.name);
            }
        }
    }

    #[test]
    fn impossible_sequences_are_left_out() {
        assert!(seq(&[AceOp::Mkdir("A"), AceOp::Mkdir("A")]).is_none());
        assert!(seq(&[AceOp::Creat("A/foo"), AceOp::Rmdir("A")]).is_none());
        assert!(seq(&[AceOp::Creat("foo"), AceOp::Creat("foo")]).is_none());
        assert!(seq(&[AceOp::Creat("bar"), AceOp::Link("foo", "bar")]).is_none());
        // a directory renamed carries its files
        let t = seq(&[
            AceOp::Creat("A/foo"),
            AceOp::Rename("A", "B"),
            AceOp::Unlink("foo"),
        ]);
        assert!(t.unwrap().test.setup.contains("rename /mnt/A /mnt/B"));
        assert!(seq(&[
            AceOp::Creat("A/foo"),
            AceOp::Rename("A", "B"),
            AceOp::Rmdir("B")
        ])
        .is_none());
    }

    #[test]
    fn generation_is_deterministic_and_counted() {
        let ops = operations(false);
        let seq1 = generate(&ops, 1, None, Form::Operations);
        assert_eq!(seq1.len(), ops.len(), "every single operation can run");
        let seq2 = generate(&ops, 2, None, Form::Operations);
        assert!(seq2.len() < ops.len() * ops.len() && seq2.len() > ops.len() * ops.len() / 2);
        let names = |tests: &[AceTest]| tests.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&seq2),
            names(&generate(&ops, 2, None, Form::Operations))
        );
        let a = generate(&ops, 3, Some((20, 1)), Form::Operations);
        let b = generate(&ops, 3, Some((20, 1)), Form::Operations);
        assert_eq!(names(&a), names(&b));
        assert!(a.len() <= 20 && !a.is_empty());
        assert_ne!(
            names(&a),
            names(&generate(&ops, 3, Some((20, 2)), Form::Operations))
        );
        // every test is a valid test file
        for t in seq1.iter().chain(&seq2) {
            TestCase::parse(&t.test.to_toml().unwrap()).unwrap();
        }
    }

    /// `calls`: the checked operation as its system calls, a write between the open and
    /// the close of its file; the form parses as a test.
    #[test]
    fn the_calls_form_splits_the_checked_operation_into_its_system_calls() {
        let ops = [AceOp::Write("foo", 100, 3000, 0)];
        let refs: Vec<&AceOp> = ops.iter().collect();
        let t = test_of(7, &refs, Form::Calls).unwrap();
        assert!(t.test.ops.is_empty());
        assert_eq!(
            t.test.calls,
            [
                "open /mnt/foo",
                "write /mnt/foo 100 3000 1",
                "close /mnt/foo"
            ]
        );
        assert_eq!(
            t.test.command(),
            "fs-ops calls 'open /mnt/foo' 'write /mnt/foo 100 3000 1' 'close /mnt/foo'\n"
        );
        let parsed = TestCase::parse(&t.test.to_toml().unwrap()).unwrap();
        assert_eq!(parsed.operations(), t.test.calls.as_slice());
        let link = [AceOp::Link("foo", "bar")];
        let refs: Vec<&AceOp> = link.iter().collect();
        let t = test_of(1, &refs, Form::Calls).unwrap();
        assert_eq!(t.test.calls, ["link /mnt/foo /mnt/bar"]);
    }
}
