//! `persim cache`: what the cache of booted snapshots and initramfs images holds, and
//! pruning what was not used lately.

use anyhow::{Context, Result};
use clap::Args;
use persim_vm::{cache_entries, prune_cache, CacheEntry, Machine};
use std::time::{Duration, SystemTime};

/// List the VM cache (booted snapshots, initramfs images, kernel symbols), or prune it.
///
/// The cache is $PERSIM_CACHE, else $XDG_CACHE_HOME/persim, else ~/.cache/persim. It keeps
/// one booted snapshot per kernel, initramfs and configuration (about 200 MB each), so it
/// grows with every kernel, configuration and build of the guest tools tried. Everything
/// in it is made again when needed: pruning only costs the next run a boot.
#[derive(Args, Debug)]
pub struct CacheArgs {
    /// Remove the files not used for --older-than days.
    #[arg(long)]
    pub prune: bool,
    /// With --prune: the days a file may go unused and stay (0: remove everything).
    #[arg(long, default_value_t = 7, value_name = "DAYS")]
    pub older_than: u64,
    /// Print the files as JSON (path, kind, bytes, days since last use).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CacheArgs) -> Result<()> {
    let dir = Machine::default_cache_dir();
    let shown = if args.prune {
        let before = SystemTime::now() - Duration::from_secs(args.older_than * 86_400);
        prune_cache(&dir, before).with_context(|| format!("cannot prune {}", dir.display()))?
    } else {
        cache_entries(&dir).with_context(|| format!("cannot read {}", dir.display()))?
    };
    if args.json {
        let files: Vec<serde_json::Value> = shown
            .iter()
            .map(|e| {
                serde_json::json!({
                    "path": e.path, "kind": e.kind, "bytes": e.bytes, "days_unused": days(e),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&files)?)?;
        return Ok(());
    }
    for e in &shown {
        outln!(
            "{:>9.1} MB  {:>4} days unused  {:<16} {}",
            e.bytes as f64 / 1e6,
            days(e),
            e.kind,
            e.path.display()
        )?;
    }
    let total: u64 = shown.iter().map(|e| e.bytes).sum();
    let what = if args.prune { "removed" } else { "in" };
    outln!(
        "{} file(s), {:.1} MB {what} {}",
        shown.len(),
        total as f64 / 1e6,
        dir.display()
    )?;
    Ok(())
}

fn days(entry: &CacheEntry) -> u64 {
    let unused = SystemTime::now().duration_since(entry.last_used);
    unused.map_or(0, |d| d.as_secs() / 86_400)
}
