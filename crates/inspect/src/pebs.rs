//! The dissertation's PEBS estimator of PM bytes per process (chapter 6) run on an exact
//! trace (`persim profile --sample-interval N`): the store counter overflows every N-th
//! store, each overflow samples that store, and a sample counts for its size × N bytes.
//! The estimate's error against the trace's exact count, per process and per store size,
//! is what sampling alone costs; what it cannot show is in docs/design/analysis.md.

use persim_trace::MAX_WRITE_LEN;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::fmt::Write as _;

/// Counts the stores of each thread (by its index) and samples every `interval`-th.
pub struct Sampler {
    interval: u64,
    /// Stores until the counter overflows.
    left: u64,
    /// Per thread: (exact bytes, samples, estimated bytes).
    threads: Vec<Tally>,
    /// Per store size (index = bytes).
    sizes: Vec<Tally>,
}

#[derive(Clone, Copy, Default)]
struct Tally {
    exact: u64,
    samples: u64,
    estimated: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.exact += other.exact;
        self.samples += other.samples;
        self.estimated += other.estimated;
    }

    fn row(self, name: String) -> Row {
        Row {
            name,
            exact_bytes: self.exact,
            samples: self.samples,
            estimated_bytes: self.estimated,
            error: (self.exact > 0).then(|| self.estimated as f64 / self.exact as f64 - 1.0),
        }
    }
}

impl Sampler {
    /// `interval` >= 1 (the command line checks it).
    pub fn new(interval: u64) -> Sampler {
        Sampler {
            interval,
            left: interval,
            threads: Vec::new(),
            sizes: vec![Tally::default(); MAX_WRITE_LEN + 1],
        }
    }

    /// A store of `len` bytes by thread `thread`.
    pub fn store(&mut self, thread: usize, len: u64) {
        if thread >= self.threads.len() {
            self.threads.resize(thread + 1, Tally::default());
        }
        let size = &mut self.sizes[len.min(MAX_WRITE_LEN as u64) as usize];
        let t = &mut self.threads[thread];
        t.exact += len;
        size.exact += len;
        self.left -= 1;
        if self.left == 0 {
            self.left = self.interval;
            let bytes = len * self.interval;
            t.samples += 1;
            t.estimated += bytes;
            size.samples += 1;
            size.estimated += bytes;
        }
    }

    /// The estimate per process, `process` naming a thread's process.
    pub fn finish(self, process: impl Fn(usize) -> String) -> Estimate {
        let mut total = Tally::default();
        let mut by_name: FxHashMap<String, Tally> = FxHashMap::default();
        for (thread, tally) in self.threads.into_iter().enumerate() {
            if tally.exact > 0 {
                total.add(tally);
                by_name.entry(process(thread)).or_default().add(tally);
            }
        }
        let mut by_process: Vec<Row> = by_name.into_iter().map(|(n, t)| t.row(n)).collect();
        by_process.sort_by(|a, b| {
            b.exact_bytes
                .cmp(&a.exact_bytes)
                .then_with(|| a.name.cmp(&b.name))
        });
        let by_size = self
            .sizes
            .into_iter()
            .enumerate()
            .filter(|(_, t)| t.exact > 0)
            .map(|(size, t)| t.row(format!("{size} B")))
            .collect();
        Estimate {
            interval: self.interval,
            total: total.row("total".into()),
            by_process,
            by_size,
        }
    }
}

/// One process's or store size's exact and estimated bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub name: String,
    pub exact_bytes: u64,
    pub samples: u64,
    pub estimated_bytes: u64,
    /// estimated / exact - 1 (None without exact bytes).
    pub error: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub interval: u64,
    pub total: Row,
    pub by_process: Vec<Row>,
    pub by_size: Vec<Row>,
}

impl Estimate {
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "PEBS estimate, one sample every {} stores (bytes = store size x {}): {} samples",
            self.interval, self.interval, self.total.samples
        );
        for (title, rows) in [
            ("process (pid)", &self.by_process),
            ("store size", &self.by_size),
        ] {
            let _ = writeln!(
                t,
                "\n{title:<24} {:>12} {:>9} {:>12} {:>9}",
                "exact bytes", "samples", "estimated", "error"
            );
            for r in rows.iter().chain([&self.total]) {
                let error = match r.error {
                    Some(e) => format!("{:+.1} %", e * 100.0),
                    None => "-".into(),
                };
                let _ = writeln!(
                    t,
                    "{:<24} {:>12} {:>9} {:>12} {error:>9}",
                    r.name, r.exact_bytes, r.samples, r.estimated_bytes
                );
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(interval: u64, stores: &[(usize, u64)]) -> Estimate {
        let mut s = Sampler::new(interval);
        for &(thread, len) in stores {
            s.store(thread, len);
        }
        s.finish(|t| format!("p{t}"))
    }

    fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
        rows.iter().find(|r| r.name == name).unwrap()
    }

    #[test]
    fn every_nth_store_counts_for_its_size_times_n() {
        // p0 stores 8 B, p1 64 B, alternating: with N = 2 every sample is p1's.
        let stores: Vec<(usize, u64)> = (0..100).map(|i| (i % 2, [8, 64][i % 2])).collect();
        let e = estimate(2, &stores);
        let (p0, p1) = (row(&e.by_process, "p0"), row(&e.by_process, "p1"));
        assert_eq!(
            (p0.exact_bytes, p0.samples, p0.estimated_bytes),
            (400, 0, 0)
        );
        assert_eq!(p0.error, Some(-1.0));
        assert_eq!(
            (p1.exact_bytes, p1.samples, p1.estimated_bytes),
            (3200, 50, 6400)
        );
        assert_eq!(p1.error, Some(1.0));
        // The periodic program aliases with the interval; an odd one samples both.
        let e = estimate(3, &stores);
        let p0 = row(&e.by_process, "p0");
        assert!(p0.error.unwrap().abs() < 0.05, "{p0:?}");
        assert_eq!(row(&e.by_size, "8 B").exact_bytes, 400);
    }

    #[test]
    fn a_uniform_mix_is_estimated_within_a_sample() {
        // Two processes interleaved irregularly: the error is that of random sampling,
        // about 1/sqrt(samples) (here ~10,000 samples per process).
        let mut rng = 7u64;
        let stores: Vec<(usize, u64)> = (0..2_000_000)
            .map(|_| {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (
                    (rng >> 33) as usize % 2,
                    [8, 16, 32, 64][(rng >> 40) as usize % 4],
                )
            })
            .collect();
        let e = estimate(101, &stores);
        for r in &e.by_process {
            assert!(r.error.unwrap().abs() < 0.02, "{r:?}");
        }
        for r in &e.by_size {
            assert!(r.error.unwrap().abs() < 0.05, "{r:?}");
        }
        assert!(e.total.error.unwrap().abs() < 0.01, "{:?}", e.total);
        assert_eq!(e.total.samples, 2_000_000 / 101);
    }

    #[test]
    fn fewer_stores_than_the_interval_give_no_sample() {
        let e = estimate(1000, &[(0, 8); 999]);
        assert_eq!(e.total.samples, 0);
        assert_eq!(e.total.error, Some(-1.0));
        assert!(e.to_text().contains("-100.0 %"));
    }
}
