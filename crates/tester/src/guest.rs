//! What runs the guest for the stages: the QEMU VM, or a fake in tests.

use crate::options::VmOptions;
use crate::testcase::TestCase;
use anyhow::Result;
use persim_vm::{
    DumpOptions, ExtractOptions, ExtractPool, Extracted, TraceOptions, TraceSummary, TracingVm,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a traced run gave.
pub type Recording = TraceSummary;

pub trait Guest {
    /// The name of the machine configuration, for reports.
    fn name(&self) -> &str;

    /// Everything about the machine that changes results (configuration, kernel, guest
    /// tools), its name on the first line: what a run directory's stages are keyed by.
    fn identity(&self) -> String;

    /// Runs `setup` untraced and `command` traced, writing the trace (and its initial
    /// image) to `trace`.
    fn record(&self, setup: &str, command: &str, trace: &Path) -> Result<Recording>;

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
}

/// The real guest: QEMU with the configuration's kernel and file system. Its guests stay
/// booted from one test to the next, for as long as it lives (a suite or a campaign boots
/// once): a tracing VM per concurrent recording, which gives each test a blank PM and a
/// fresh file system (`persim_vm::TracingVm`), and pools of extraction guests.
pub struct VmGuest {
    pub options: VmOptions,
    /// Record loads too.
    pub reads: bool,
    /// Attach a stack trace to every entry, and how.
    pub stack_traces: persim_vm::Stacks,
    /// Record in guests whose time counts instructions: a test traced first in a fresh
    /// guest (every `persim run`) gives the same trace in every run.
    pub reproducible: bool,
    /// Idle tracing VMs.
    tracers: Mutex<Vec<TracingVm>>,
    /// The extraction pools without and with read tracing, made when first needed.
    pools: Mutex<[Option<Arc<ExtractPool>>; 2]>,
}

impl VmGuest {
    pub fn new(options: VmOptions) -> VmGuest {
        VmGuest {
            options,
            reads: false,
            stack_traces: persim_vm::Stacks::Off,
            reproducible: false,
            tracers: Mutex::default(),
            pools: Mutex::default(),
        }
    }

    /// The extraction pool with or without read tracing.
    fn pool(&self, reads: bool) -> Result<Arc<ExtractPool>> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = &pools[usize::from(reads)] {
            return Ok(Arc::clone(pool));
        }
        let o = &self.options;
        let mut options =
            ExtractOptions::new(o.config.clone(), o.artifacts.clone(), o.cache_dir.clone());
        options.timeout = o.timeout;
        options.boot_timeout = o.boot_timeout;
        options.jobs = o.jobs;
        options.reads = reads;
        let pool = Arc::new(ExtractPool::new(options)?);
        pools[usize::from(reads)] = Some(Arc::clone(&pool));
        Ok(pool)
    }
}

impl Guest for VmGuest {
    fn name(&self) -> &str {
        &self.options.config.name
    }

    fn identity(&self) -> String {
        let o = &self.options;
        // The file behind a stable link (vm/ext4-dax-6.12.toml's), so a new build counts.
        let kernel = persim_vm::Kernel::for_config(&o.config)
            .map(|k| k.image.canonicalize().unwrap_or(k.image))
            .map(|image| image.display().to_string())
            .unwrap_or_default();
        // Stack traces change the recorded trace (and what `fast` skips).
        let stacks = match self.stack_traces {
            persim_vm::Stacks::Off => String::new(),
            on => format!("\nstack traces {}", on.name()),
        };
        format!(
            "{}\n{}\nkernel {kernel}\nguest tools {}{stacks}",
            o.config.name,
            crate::inputs::stable_text(&o.config),
            crate::inputs::stable_text(&o.artifacts.guest_tools)
        )
    }

    fn record(&self, setup: &str, command: &str, trace: &Path) -> Result<Recording> {
        let idle = self.tracers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut tracer = match idle {
            Some(tracer) => tracer,
            None => {
                let o = &self.options;
                TracingVm::new(&TraceOptions {
                    config: o.config.clone(),
                    command: command.to_string(),
                    setup: setup.to_string(),
                    output: trace.to_path_buf(),
                    reads: self.reads,
                    stack_traces: self.stack_traces,
                    reproducible: self.reproducible,
                    timeout: o.timeout,
                    boot_timeout: o.boot_timeout,
                    cache_dir: o.cache_dir.clone(),
                    artifacts: o.artifacts.clone(),
                    progress: o.progress,
                })?
            }
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
            exclude: self.options.config.dump_exclude.clone(),
            ..DumpOptions::default()
        };
        Ok(self.pool(reads)?.extract(&dump, images, finished)?)
    }
}
