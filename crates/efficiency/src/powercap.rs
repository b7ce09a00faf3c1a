//! RAPL energy counters through Linux' powercap interface
//! (`/sys/class/powercap/intel-rapl:*`): the package and DRAM zones, whose `energy_uj`
//! wraps around at `max_energy_range_uj`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the kernel puts the powercap zones.
pub const POWERCAP_DIR: &str = "/sys/class/powercap";

/// One RAPL zone the energy cost counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    /// The zone's directory, e.g. `/sys/class/powercap/intel-rapl:0:1`.
    pub dir: PathBuf,
    /// Its `name`: `package-N` or `dram`.
    pub name: String,
    /// Where `energy_uj` wraps.
    pub max_energy_range_uj: u64,
}

/// The package and DRAM zones under `root` (core, uncore and psys are parts of a package
/// or the whole platform, and counting them too would count energy twice).
pub fn rapl_zones(root: &Path) -> Result<Vec<Zone>, String> {
    let entries = std::fs::read_dir(root).map_err(|e| {
        format!(
            "cannot read {}: {e}; this machine has no powercap interface \
             (the kernel's intel_rapl_msr module), use --power meter:COMMAND or --power none",
            root.display()
        )
    })?;
    let mut zones = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        if !file_name.to_string_lossy().starts_with("intel-rapl:") {
            continue;
        }
        let dir = entry.path();
        let Ok(name) = std::fs::read_to_string(dir.join("name")) else {
            continue;
        };
        let name = name.trim().to_owned();
        if !(name.starts_with("package") || name == "dram") {
            continue;
        }
        let max_energy_range_uj = read_u64(&dir.join("max_energy_range_uj"))?;
        zones.push(Zone {
            dir,
            name,
            max_energy_range_uj,
        });
    }
    zones.sort_by(|a, b| a.dir.cmp(&b.dir));
    if zones.is_empty() {
        return Err(format!(
            "{} has no RAPL package or DRAM zone (intel-rapl:*); use --power meter:COMMAND or --power none",
            root.display()
        ));
    }
    Ok(zones)
}

/// The zones' counters at one moment, by zone directory; a zone whose counter could not
/// be read (gone, or unreadable) is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<PathBuf, u64>);

impl Snapshot {
    pub fn read(zones: &[Zone]) -> Snapshot {
        Snapshot(
            zones
                .iter()
                .filter_map(|z| Some((z.dir.clone(), read_u64(&z.dir.join("energy_uj")).ok()?)))
                .collect(),
        )
    }
}

/// The energy used from `before` to `after` in joules, summed over the zones read both
/// times, with a counter that went back taken as one wrap at its `max_energy_range_uj`
/// (sampled at least once a minute, a counter wraps at most once between two samples).
/// The zones missing from either snapshot are returned beside it.
pub fn joules_between(zones: &[Zone], before: &Snapshot, after: &Snapshot) -> (f64, Vec<String>) {
    let mut microjoules = 0u64;
    let mut missing = Vec::new();
    for zone in zones {
        match (before.0.get(&zone.dir), after.0.get(&zone.dir)) {
            (Some(&b), Some(&a)) => {
                microjoules += if a >= b {
                    a - b
                } else {
                    zone.max_energy_range_uj - b + a
                };
            }
            _ => missing.push(zone.name.clone()),
        }
    }
    (microjoules as f64 / 1e6, missing)
}

fn read_u64(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            " (RAPL counters are readable by root only)"
        } else {
            ""
        };
        format!("cannot read {}: {e}{hint}", path.display())
    })?;
    text.trim()
        .parse()
        .map_err(|_| format!("{}: `{}` is not a number", path.display(), text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A powercap tree as a 1-socket Intel machine has it: package-0 with core, uncore
    /// and dram subzones, and psys.
    fn tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let zone = |dir: &str, name: &str, energy: u64, max: u64| {
            let d = root.path().join(dir);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("name"), format!("{name}\n")).unwrap();
            fs::write(d.join("energy_uj"), format!("{energy}\n")).unwrap();
            fs::write(d.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
        };
        zone(
            "intel-rapl:0",
            "package-0",
            262_143_000_000,
            262_143_328_850,
        );
        zone("intel-rapl:0:0", "core", 5_000_000, 262_143_328_850);
        zone("intel-rapl:0:1", "uncore", 6_000_000, 262_143_328_850);
        zone("intel-rapl:0:2", "dram", 1_000_000, 65_712_999_613);
        zone("intel-rapl:1", "psys", 9_000_000, 262_143_328_850);
        fs::create_dir_all(root.path().join("intel-rapl")).unwrap();
        root
    }

    fn set(root: &Path, dir: &str, energy: u64) {
        fs::write(root.join(dir).join("energy_uj"), format!("{energy}\n")).unwrap();
    }

    #[test]
    fn package_and_dram_zones_only() {
        let root = tree();
        let names: Vec<String> = rapl_zones(root.path())
            .unwrap()
            .into_iter()
            .map(|z| z.name)
            .collect();
        assert_eq!(names, ["package-0", "dram"]);
    }

    #[test]
    fn a_wrapped_counter_counts_up_to_its_range_and_on_from_zero() {
        let root = tree();
        let zones = rapl_zones(root.path()).unwrap();
        let before = Snapshot::read(&zones);
        // package-0 wrapped: 328_850 µJ to the end of its range, then 671_150 µJ
        set(root.path(), "intel-rapl:0", 671_150);
        set(root.path(), "intel-rapl:0:2", 3_500_000);
        let after = Snapshot::read(&zones);
        let (joules, missing) = joules_between(&zones, &before, &after);
        assert!(missing.is_empty());
        assert!((joules - (1.0 + 2.5)).abs() < 1e-9, "{joules}");
    }

    #[test]
    fn a_zone_gone_between_snapshots_is_named_and_not_counted() {
        let root = tree();
        let zones = rapl_zones(root.path()).unwrap();
        let before = Snapshot::read(&zones);
        fs::remove_dir_all(root.path().join("intel-rapl:0:2")).unwrap();
        set(root.path(), "intel-rapl:0", 262_143_000_000 + 2_000_000);
        let after = Snapshot::read(&zones);
        let (joules, missing) = joules_between(&zones, &before, &after);
        assert_eq!(missing, ["dram"]);
        assert!((joules - 2.0).abs() < 1e-9, "{joules}");
    }

    #[test]
    fn no_zones_is_an_error_that_names_the_alternatives() {
        let empty = tempfile::tempdir().unwrap();
        let err = rapl_zones(empty.path()).unwrap_err();
        assert!(err.contains("--power none"), "{err}");
        let err = rapl_zones(&empty.path().join("absent")).unwrap_err();
        assert!(err.contains("meter:COMMAND"), "{err}");
    }
}
