//! `persim generate ace --seq N --out DIR`: generated tests, which `persim campaign run DIR` runs.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use persim_tester::ace::{generate, operations, Form, MAX_SEQ};
use persim_trace::atomic_file::write_atomically;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum GenerateCommand {
    /// Every sequence of N file-system operations in the manner of ACE (CrashMonkey,
    /// Chipmunk): creat, mkdir, write (overwrite, unaligned, across a line and a page,
    /// append), fallocate (4 modes, inside and beyond the end), truncate, link, unlink,
    /// rename (files, over an existing file, a directory), symlink, rmdir, setxattr,
    /// removexattr over foo, bar, A/foo, A/bar; what a sequence needs first is inserted.
    /// Only the last operation lies between checkpoints, the rest run in setup. Each test
    /// runs its operations with the guest tool fs-ops. Then: `persim campaign run DIR --fs ext4 --out RESULTS`.
    Ace(AceArgs),
}

#[derive(Args, Debug)]
pub struct AceArgs {
    /// Operations per sequence: 1 and 2 are generated exhaustively (47 and about 2,000
    /// tests); longer ones (at most 25) need --sample.
    #[arg(long)]
    pub seq: usize,
    /// A seeded sample of this many sequences instead of all of them.
    #[arg(long)]
    pub sample: Option<usize>,
    /// The seed of --sample (same seed, same tests).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also fsync as an operation (a PM file system makes every operation durable
    /// without it).
    #[arg(long)]
    pub persistence: bool,
    /// Each test's checked operation as its system calls in one process (open, pwrite,
    /// fsync, close, …), a checkpoint after each and no `sync` (test key `calls`): every
    /// call must be durable when it returns, as a PM file system promises (Chipmunk's
    /// check). Without it, the operation runs whole and is followed by `sync`.
    #[arg(long)]
    pub calls: bool,
    /// The directory the test files go to (created).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(command: &GenerateCommand) -> Result<()> {
    let GenerateCommand::Ace(args) = command;
    if args.seq == 0 {
        bail!("--seq must be at least 1");
    }
    if args.seq > MAX_SEQ {
        bail!(
            "--seq {} is too long: give at most {MAX_SEQ} (each write of a sequence gets its \
             own bytes, the fs-ops write tags 1 to {MAX_SEQ})",
            args.seq
        );
    }
    if args.seq > 2 && args.sample.is_none() {
        bail!(
            "--seq {} has too many sequences to run them all: give --sample N (and --seed)",
            args.seq
        );
    }
    let ops = operations(args.persistence);
    let form = match args.calls {
        true => Form::Calls,
        false => Form::Operations,
    };
    let tests = generate(&ops, args.seq, args.sample.map(|n| (n, args.seed)), form);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for t in &tests {
        let path = args.out.join(format!("{}.toml", t.name));
        let text = t.test.to_toml()?;
        write_atomically(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    say!(
        "persim generate: {} tests of {} operation(s) from {} operations in {} (run them: \
         persim campaign run {} --fs ext4 --out RESULTS)",
        tests.len(),
        args.seq,
        ops.len(),
        args.out.display(),
        args.out.display()
    );
    Ok(())
}
