//! What runs the guest for the stages: the QEMU VM, or a fake in tests.

use crate::options::VmOptions;
use crate::testcase::TestCase;
use anyhow::Result;
use persim_vm::{extract_states, ExtractOptions, Extracted, TraceOptions, TraceSummary};
use std::path::{Path, PathBuf};

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

/// The real guest: QEMU with the configuration's kernel and file system.
pub struct VmGuest {
    pub options: VmOptions,
    /// Record loads too.
    pub reads: bool,
    /// Attach a stack trace to every entry, and how.
    pub stack_traces: persim_vm::Stacks,
}

impl VmGuest {
    pub fn new(options: VmOptions) -> VmGuest {
        VmGuest {
            options,
            reads: false,
            stack_traces: persim_vm::Stacks::Off,
        }
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
            "{}\n{:?}\nkernel {kernel}\nguest tools {:?}{stacks}",
            o.config.name, o.config, o.artifacts.guest_tools
        )
    }

    fn record(&self, setup: &str, command: &str, trace: &Path) -> Result<Recording> {
        let o = &self.options;
        Ok(persim_vm::trace(&TraceOptions {
            config: o.config.clone(),
            command: command.to_string(),
            setup: setup.to_string(),
            output: trace.to_path_buf(),
            reads: self.reads,
            stack_traces: self.stack_traces,
            timeout: o.timeout,
            boot_timeout: o.boot_timeout,
            cache_dir: o.cache_dir.clone(),
            artifacts: o.artifacts.clone(),
            progress: o.progress,
        })?)
    }

    fn extract(
        &self,
        test: &TestCase,
        images: &[PathBuf],
        reads: bool,
        finished: &mut dyn FnMut(usize, &Extracted),
    ) -> Result<Vec<Extracted>> {
        let o = &self.options;
        let mut options =
            ExtractOptions::new(o.config.clone(), o.artifacts.clone(), o.cache_dir.clone());
        options.dump.command = test.state.clone();
        options.dump.ignore = test.ignore.clone();
        options.dump.exclude = o.config.dump_exclude.clone();
        options.timeout = o.timeout;
        options.boot_timeout = o.boot_timeout;
        options.jobs = o.jobs;
        options.reads = reads;
        Ok(extract_states(&options, images, finished)?)
    }
}
