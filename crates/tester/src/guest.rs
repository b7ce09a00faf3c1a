//! What runs the guest for the stages: the QEMU VM, or a fake in tests.

use crate::cases::TestCase;
use anyhow::Result;
use persim_vm::{
    DumpOptions, ExtractMode, ExtractPool, Extracted, Machine, RecordOptions, TraceSummary,
    TracingVm,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a traced run gave.
pub type Recorded = TraceSummary;

pub trait Guest {
    /// The name of the machine configuration, for reports.
    fn name(&self) -> &str;

    /// Everything about the machine that changes results (configuration, kernel, guest
    /// tools), its name on the first line: what a run directory's stages are keyed by.
    fn identity(&self) -> String;

    /// What of the machine changes recovery (configuration, kernel, guest tools, not how
    /// a run is recorded): `persim faults` refuses to judge a run's images on another.
    fn recovery_identity(&self) -> String {
        self.identity()
    }

    /// The configuration file the machine was loaded from, if any: recorded in a run
    /// directory, so that the commands that recover its images again find it.
    fn config_file(&self) -> Option<PathBuf> {
        None
    }

    /// Runs `setup` untraced and `command` traced, writing the trace (and its initial
    /// image) to `trace`.
    fn record(&self, setup: &str, command: &str, trace: &Path) -> Result<Recorded>;

    /// Recovers each image and extracts its state as `test` asks, with `reads` also the PM
    /// words that recovery read of it; `finished(i, result)` is called as soon as image `i` has
    /// its result.
    fn extract(
        &self,
        test: &TestCase,
        images: &[PathBuf],
        reads: bool,
        finished: &mut dyn FnMut(usize, &Extracted),
    ) -> Result<Vec<Extracted>>;

    /// The configuration whose final states this one's are compared with (`--reference`),
    /// if any: every test runs there too, without a crash.
    fn reference(&self) -> Option<&dyn Guest> {
        None
    }

    /// How many images [`Guest::extract`] recovers at once.
    fn workers(&self) -> usize {
        1
    }
}

/// The real guest: QEMU with the configuration's kernel and file system. Its guests stay
/// booted from one test to the next, for as long as it lives (a suite or a campaign boots
/// once): a tracing VM per concurrent recording, which gives each test a blank PM and a
/// fresh file system (`persim_vm::TracingVm`), and pools of extraction guests.
pub struct VmGuest {
    pub machine: Machine,
    /// What the recordings hold besides stores (loads, stack traces), and whether their
    /// guests' time counts instructions: a test traced first in a fresh guest (every
    /// `persim run`) then gives the same trace in every run.
    pub record: RecordOptions,
    /// Idle tracing VMs.
    tracers: Mutex<Vec<TracingVm>>,
    /// The extraction pools without and with read tracing, made when first needed.
    pools: Mutex<[Option<Arc<ExtractPool>>; 2]>,
    /// The reference configuration (`--reference`), whose guests stay booted too.
    pub reference: Option<Box<VmGuest>>,
}

impl VmGuest {
    pub fn new(machine: Machine) -> VmGuest {
        VmGuest {
            machine,
            record: RecordOptions::default(),
            tracers: Mutex::default(),
            pools: Mutex::default(),
            reference: None,
        }
    }

    /// The extraction pool with or without read tracing.
    fn pool(&self, reads: bool) -> Result<Arc<ExtractPool>> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = &pools[usize::from(reads)] {
            return Ok(Arc::clone(pool));
        }
        let pool = Arc::new(ExtractPool::new(
            &self.machine,
            ExtractMode::ReuseGuest,
            reads,
        )?);
        pools[usize::from(reads)] = Some(Arc::clone(&pool));
        Ok(pool)
    }
}

impl Guest for VmGuest {
    fn name(&self) -> &str {
        &self.machine.config.name
    }

    fn identity(&self) -> String {
        // Stack traces change the recorded trace (and what `fast` skips).
        let stacks = match self.record.stack_traces {
            persim_vm::Stacks::Off => String::new(),
            on => format!("\nstack traces {}", on.name()),
        };
        format!("{}{stacks}", self.recovery_identity())
    }

    fn recovery_identity(&self) -> String {
        let m = &self.machine;
        // The file behind a stable link (vm/ext4-dax-6.12.toml's), so a new build counts.
        let kernel = persim_vm::Kernel::for_config(&m.config)
            .map(|k| k.image.canonicalize().unwrap_or(k.image))
            .map(|image| image.display().to_string())
            .unwrap_or_default();
        format!(
            "{}\n{}\nkernel {kernel}\nguest tools {}",
            m.config.name,
            crate::inputs::stable_text(&m.config),
            crate::inputs::stable_text(&m.artifacts.guest_tools)
        )
    }

    fn config_file(&self) -> Option<PathBuf> {
        self.machine.config_file.clone()
    }

    fn record(&self, setup: &str, command: &str, trace: &Path) -> Result<Recorded> {
        let idle = self.tracers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut tracer = match idle {
            Some(tracer) => tracer,
            None => TracingVm::new(&self.machine, self.record.clone())?,
        };
        let recording = tracer.record(setup, command, trace)?;
        self.tracers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tracer);
        Ok(recording)
    }

    fn extract(
        &self,
        test: &TestCase,
        images: &[PathBuf],
        reads: bool,
        finished: &mut dyn FnMut(usize, &Extracted),
    ) -> Result<Vec<Extracted>> {
        let dump = DumpOptions {
            command: test.state.clone(),
            ignore: test.ignore.clone(),
            exclude: self.machine.config.dump_exclude.clone(),
            ..DumpOptions::default()
        };
        Ok(self.pool(reads)?.extract(&dump, images, finished)?)
    }

    fn reference(&self) -> Option<&dyn Guest> {
        self.reference.as_deref().map(|r| r as &dyn Guest)
    }

    fn workers(&self) -> usize {
        self.machine.jobs.max(1)
    }
}
