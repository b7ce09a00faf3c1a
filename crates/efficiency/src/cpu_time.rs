//! System-wide CPU time from `/proc/stat` (the thesis' CPU cost, docs/guides/efficiency.md):
//! user + system + irq + softirq of all CPUs. Deliberately system-wide, because file
//! systems do much of their work in kernel threads that no per-process count sees.

use std::io;

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks (`USER_HZ`).
///
/// The aggregate line sums every *possible* CPU, and a CPU's counters survive it going
/// offline, so it only grows when CPUs are hot-plugged between two snapshots; the per-CPU
/// lines come and go with their CPUs and are not used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    /// Time running guests, already counted in `user` (and `guest_nice` in `nice`).
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTimes {
    /// Reads `/proc/stat` now.
    pub fn now() -> io::Result<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat")?;
        CpuTimes::parse(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The aggregate `cpu` line of a `/proc/stat` text. Old kernels print fewer columns;
    /// the missing ones are 0.
    pub fn parse(text: &str) -> Result<CpuTimes, String> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some("cpu"))
            .ok_or("/proc/stat has no aggregate `cpu` line")?;
        let mut values = [0u64; 10];
        for (slot, field) in values.iter_mut().zip(line.split_whitespace().skip(1)) {
            *slot = field
                .parse()
                .map_err(|_| format!("/proc/stat: `{field}` in `{line}` is not a number"))?;
        }
        let [user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice] = values;
        Ok(CpuTimes {
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
            guest,
            guest_nice,
        })
    }

    /// The ticks the thesis counts: user + system + irq + softirq. Nice, steal, iowait
    /// and guest time are left out (guest time by taking it off `user`, which includes it).
    pub fn busy(&self) -> u64 {
        self.user.saturating_sub(self.guest) + self.system + self.irq + self.softirq
    }

    /// All ticks of all CPUs, idle included (guest time once).
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    /// The busy and total ticks from `earlier` to `self` (0 where a counter went back,
    /// which a hot-plug never causes on the aggregate line but a hand-made text may).
    pub fn since(&self, earlier: &CpuTimes) -> Ticks {
        Ticks {
            busy: self.busy().saturating_sub(earlier.busy()),
            total: self.total().saturating_sub(earlier.total()),
        }
    }
}

/// Busy and total ticks over an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticks {
    pub busy: u64,
    pub total: u64,
}

impl Ticks {
    /// The busy share of all CPUs' time, in percent (0 for an empty interval).
    pub fn busy_percent(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            100.0 * self.busy as f64 / self.total as f64
        }
    }
}

/// Clock ticks per second of `/proc/stat` (`USER_HZ`).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded on a 2-CPU Debian 12 machine (the first three lines of `/proc/stat`).
    const BEFORE: &str = "cpu  3479273 52503 350950 545079 7997 0 3974 12796 0 0
cpu0 1734433 28199 178361 272787 4432 0 1752 6405 0 0
cpu1 1744839 24303 172588 272291 3564 0 2222 6391 0 0
intr 52203734 0 0 0
ctxt 247133515
";

    #[test]
    fn busy_is_user_system_irq_softirq_without_nice_steal_iowait() {
        let t = CpuTimes::parse(BEFORE).unwrap();
        assert_eq!(t.busy(), 3479273 + 350950 + 3974);
        assert_eq!(
            t.total(),
            3479273 + 52503 + 350950 + 545079 + 7997 + 3974 + 12796
        );
    }

    #[test]
    fn guest_time_is_taken_off_user() {
        let t = CpuTimes::parse("cpu  1000 0 200 50 0 10 20 0 300 0\n").unwrap();
        assert_eq!(t.busy(), 700 + 200 + 10 + 20);
    }

    #[test]
    fn a_cpu_going_offline_does_not_make_time_go_back() {
        // cpu1 went offline between the snapshots: its line is gone, the aggregate line
        // still holds its ticks and grew by cpu0's.
        let after = "cpu  3479473 52503 351050 545179 7997 0 3974 12796 0 0
cpu0 1734633 28199 178461 272887 4432 0 1752 6405 0 0
intr 52203734 0 0 0
";
        let d = CpuTimes::parse(after)
            .unwrap()
            .since(&CpuTimes::parse(BEFORE).unwrap());
        assert_eq!(
            d,
            Ticks {
                busy: 300,
                total: 400
            }
        );
        assert_eq!(d.busy_percent(), 75.0);
    }

    #[test]
    fn a_cpu_coming_online_adds_its_ticks() {
        let one = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0 0 0\n";
        let two = "cpu  400 0 200 1400 0 0 0 0 0 0
cpu0 200 0 150 1050 0 0 0 0 0 0
cpu1 200 0 50 350 0 0 0 0 0 0
";
        let d = CpuTimes::parse(two)
            .unwrap()
            .since(&CpuTimes::parse(one).unwrap());
        assert_eq!(
            d,
            Ticks {
                busy: 400,
                total: 1000
            }
        );
    }

    #[test]
    fn old_kernels_with_fewer_columns_parse() {
        let t = CpuTimes::parse("cpu  10 1 20 300 4 5 6\n").unwrap();
        assert_eq!((t.busy(), t.steal, t.guest), (41, 0, 0));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(CpuTimes::parse("intr 1 2\n").is_err());
        assert!(CpuTimes::parse("cpu  10 x 20\n").is_err());
    }
}
