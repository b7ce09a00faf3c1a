//! A guest without a VM for the pipeline's and campaigns' tests.

use persim_state::Recovered;
use persim_tester::{Guest, Recorded, Suite, TestCase};
use persim_vm::Extracted;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A counter the fake bumps from any thread.
#[derive(Default)]
pub struct Count(AtomicUsize);

impl Count {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, n: usize) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
}

/// The text of examples/<example>.
pub fn example_text(example: &str) -> &'static str {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(example);
    std::fs::read_to_string(path).unwrap().leak()
}

/// Seven tests in `dir` (suite `gen`); t1 and t4, whose operation says so, record the
/// journal without its fence (`FakeGuest::other_traces`' marker `missing-fence`). Used by
/// the campaign tests and the cli's html_report.rs, not by every test crate here.
#[allow(dead_code)]
pub fn journal_suite(dir: &Path) -> Suite {
    for i in 0..7 {
        let op = if i % 3 == 1 {
            "missing-fence"
        } else {
            "update"
        };
        std::fs::write(
            dir.join(format!("t{i}.toml")),
            format!("description = \"journal\"\nops = [\"journal-{op}\"]\n"),
        )
        .unwrap();
    }
    Suite {
        name: "gen".into(),
        dir: dir.to_path_buf(),
    }
}

const PM_SIZE: u64 = 0x1000;

/// Records a fixed text trace; "recovers" the redo journal of examples/journal.trace: the
/// home values, with the logged ones applied when the commit flag is set.
pub struct FakeGuest {
    /// The machine's name, the first line of its identity.
    pub machine: &'static str,
    pub trace: &'static str,
    /// (marker, trace): a command containing the marker records that trace instead.
    pub other_traces: Vec<(&'static str, &'static str)>,
    pub exit_code: i32,
    /// Symbols (kallsyms text) saved beside each recorded trace, as the VM saves the guest's.
    pub symbols: Option<&'static str>,
    /// Hang in the last operation: fail as the VM does, with the console output so far.
    pub hang: bool,
    /// The initial PM image recorded (default: PM_SIZE zeros); its length is the PM size.
    pub initial: Vec<u8>,
    pub records: Count,
    pub extracted: Count,
    /// Of those, recoveries traced for their reads.
    pub traced_reads: Count,
    /// The reference configuration (`--reference`).
    pub reference: Option<Box<FakeGuest>>,
    /// What recovery logs of an image, given its PM before recovery reads it; it may
    /// repair the PM first (a file system with replicas or parity).
    pub recovery_log: fn(&mut [u8]) -> Vec<String>,
}

impl FakeGuest {
    pub fn new(example: &str) -> FakeGuest {
        FakeGuest {
            machine: "fake",
            trace: example_text(example),
            other_traces: Vec::new(),
            exit_code: 0,
            symbols: None,
            hang: false,
            initial: vec![0; PM_SIZE as usize],
            records: Count::default(),
            extracted: Count::default(),
            traced_reads: Count::default(),
            reference: None,
            recovery_log: |_| Vec::new(),
        }
    }
}

impl Guest for FakeGuest {
    fn name(&self) -> &str {
        self.machine
    }

    fn identity(&self) -> String {
        format!("{}\n{}", self.machine, self.trace)
    }

    fn reference(&self) -> Option<&dyn Guest> {
        self.reference.as_deref().map(|r| r as &dyn Guest)
    }

    fn record(&self, _setup: &str, command: &str, trace: &Path) -> anyhow::Result<Recorded> {
        self.records.add(1);
        if self.hang {
            // what the guest's shell printed: every `echo` of the command ran
            let printed: Vec<&str> = command
                .lines()
                .filter_map(|l| l.strip_prefix("echo "))
                .filter(|l| !l.contains('$'))
                .collect();
            anyhow::bail!(
                "the guest did not finish the traced run within 1 s and was killed\n\
                 --- last console output ---\n{}",
                printed.join("\n")
            );
        }
        let text = self
            .other_traces
            .iter()
            .find(|(marker, _)| command.contains(marker))
            .map_or(self.trace, |(_, text)| text);
        let recording = persim_trace::Recording::new(trace);
        std::fs::write(trace, text)?;
        std::fs::write(recording.initial_image(), &self.initial)?;
        if let Some(symbols) = self.symbols {
            persim_trace::Symbols::from_kallsyms(symbols).save(&recording.symbols())?;
        }
        Ok(Recorded {
            exit_code: self.exit_code,
            output: "rm: can't remove 'x': No such file or directory\n".into(),
            kernel_errors: Vec::new(),
            pm_base: 0,
            pm_size: self.initial.len() as u64,
            boot: Duration::ZERO,
            setup: Duration::ZERO,
            traced: Duration::ZERO,
            shutdown: Duration::ZERO,
        })
    }

    fn extract(
        &self,
        _test: &TestCase,
        images: &[PathBuf],
        reads: bool,
        finished: &mut dyn FnMut(usize, &Extracted),
    ) -> anyhow::Result<Vec<Extracted>> {
        let mut states = Vec::new();
        for (i, image) in images.iter().enumerate() {
            let mut pm = std::fs::read(image)?;
            let kernel_log = (self.recovery_log)(&mut pm);
            // the log is read only when the commit flag is set
            let (home, mut words_read) = if pm[0x40] == 1 {
                (&pm[0..0x10], vec![0x00, 0x08, 0x40, 0x80, 0x88])
            } else {
                (&pm[0x80..0x90], vec![0x40, 0x80, 0x88])
            };
            // and a 16-byte value of its own (examples/nt-split-update.trace)
            let value = &pm[0x100..0x110];
            words_read.extend([0x100, 0x108]);
            let extracted = Extracted {
                state: Recovered::state(&format!(
                    "{{\"home\": \"{home:02x?}\", \"value\": \"{value:02x?}\"}}"
                )),
                words_read: reads.then_some(words_read),
                kernel_log,
            };
            finished(i, &extracted);
            states.push(extracted);
            self.extracted.add(1);
            self.traced_reads.add(usize::from(reads));
        }
        Ok(states)
    }
}
