//! Recording: the tracing VM, which boots the configured guest with the tracing plugin,
//! sets up the file system and runs the user's commands between `hypercall start` and
//! `hypercall success|fail` (what the CLI's `persim trace` does). Named `record`, not
//! `trace`, because the trace itself (its format, reading, writing) is the crate
//! `persim-trace`'s.

use crate::boot::{prepare, Prepared};
use crate::console::Vm;
use crate::error::VmError;
use crate::machine::Machine;
use crate::qemu::{Plugin, QemuSpec};
use crate::scratch::ScratchPm;
use crate::shell::shell_quote;
use crate::symbols::{SymbolSaver, USER_MAPS};
use persim_abi::machine::PM_BASE;
use persim_abi::{PluginArgs, Stacks};
use persim_trace::Recording;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The traced run's script; `@COMMAND@` stands for the user's commands (quoted).
const TRACED_RUN: &str = include_str!("traced-run.sh");

/// What a tracing VM's recordings hold besides PM stores, and how they run: the choices of
/// one guest's recordings, which the [`Machine`] leaves open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordOptions {
    /// Record loads too.
    pub reads: bool,
    /// A stack trace with every entry, and how it is found.
    pub stack_traces: Stacks,
    /// Guest time counts instructions (`-icount`), so a recording in a fresh guest gives
    /// the same trace in every run (docs/design/tracer.md, "Reproducibility").
    pub reproducible: bool,
    /// The plugin counts instead of tracing (`count=on`): each recording's output file
    /// holds `persim_abi::Counts` text, not a trace (docs/guides/efficiency.md).
    pub count: bool,
    /// With `count`: the instructions of each kernel block too (`profile=on`).
    pub profile: bool,
    /// Virtual CPUs of a counting guest (0 counts as 1). A tracing guest always has one:
    /// a trace is one vCPU's order of accesses.
    pub cpus: u32,
    /// Functions whose calls are recorded (`pmdk` for the built-in set; docs/design/tracer.md,
    /// "Library calls"), found in the configuration's `tools` and their libraries.
    pub trace_calls: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct TraceSummary {
    /// Exit code of the traced commands.
    pub exit_code: i32,
    pub output: String,
    pub kernel_errors: Vec<String>,
    pub pm_base: u64,
    pub pm_size: u64,
    pub boot: Duration,
    pub setup: Duration,
    pub traced: Duration,
    pub shutdown: Duration,
}

/// Records a trace of `command` after `setup` into `output` in a guest of its own
/// ([`TracingVm::record`] says how). On an error (a hang, a guest panic, QEMU failing)
/// nothing of the recording is left: no partial trace, initial image or temporary file.
pub fn trace(
    machine: &Machine,
    options: RecordOptions,
    setup: &str,
    command: &str,
    output: &Path,
) -> Result<TraceSummary, VmError> {
    let mut vm = TracingVm::new(machine, options)?;
    let mut summary = vm.record(setup, command, output)?;
    summary.shutdown = vm.shutdown()?;
    Ok(summary)
}

/// A guest with the tracing plugin that records one test after another without booting
/// again (a campaign's warm start). Before each recording after the first, the NVDIMM is
/// detached, its file zeroed and attached again, so the test starts from a blank PM as
/// after a boot, and the file system is made afresh; the plugin (`repeat`) writes each
/// trace and initial image where two links in the cache directory then point: into the
/// recording's own directory. A recording that fails takes the guest with it; the next
/// one boots a new guest.
pub struct TracingVm {
    machine: Machine,
    prepared: Prepared,
    spec: QemuSpec,
    pm: ScratchPm,
    /// The NVMe namespace's file, with the plugin's link to its initial copy. A guest with
    /// one records a single test: the block device and the controller start blank at boot.
    blk: Option<(ScratchPm, PathBuf)>,
    vm: Option<Vm>,
    /// Whether the guest's PM holds an earlier recording's file system.
    used: bool,
    /// Where the plugin writes: links to the current recording's trace and initial image.
    links: (PathBuf, PathBuf),
    /// The symbols of the recordings so far, which the next may share.
    symbols: SymbolSaver,
}

impl Drop for TracingVm {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.links.0);
        let _ = std::fs::remove_file(&self.links.1);
        if let Some((_, link)) = &self.blk {
            let _ = std::fs::remove_file(link);
        }
    }
}

impl TracingVm {
    /// Prepares a guest of `machine` that records as `options` say (booted at the first
    /// recording).
    pub fn new(machine: &Machine, options: RecordOptions) -> Result<TracingVm, VmError> {
        let prepared = prepare(&machine.config, &machine.artifacts, &machine.cache_dir)?;
        let pm = ScratchPm::create(&machine.cache_dir, machine.config.pm_size())?;
        let links = (
            pm.path().with_extension("trace"),
            pm.path().with_extension("initial"),
        );
        let blk_size = machine.config.blk_size();
        let blk = if blk_size > 0 {
            let file = ScratchPm::create(&machine.cache_dir, blk_size)?;
            let link = pm.path().with_extension("blk-initial");
            Some((file, link))
        } else {
            None
        };
        let calls = crate::calls::write_table(
            &options.trace_calls,
            &machine.config.tools,
            &pm.path().with_extension("calls"),
        )?;
        let cpus = if options.count {
            options.cpus.max(1)
        } else {
            1
        };
        let spec = QemuSpec {
            plugin: Some(Plugin {
                library: machine.artifacts.plugin.clone(),
                args: PluginArgs {
                    reads: options.reads,
                    stacks: options.stack_traces,
                    tracing: !options.count,
                    count: options.count,
                    serial: options.count && options.reproducible && cpus > 1,
                    profile: options.count && options.profile,
                    initial: Some((pm.path().to_owned(), links.1.clone())),
                    repeat: true,
                    blk_size,
                    blk_initial: blk
                        .as_ref()
                        .map(|(file, link)| (file.path().to_owned(), link.clone())),
                    calls,
                    ..PluginArgs::new(PM_BASE, machine.config.pm_size(), links.0.clone())
                },
            }),
            // A booted snapshot holds no disk contents and a controller that has run.
            snapshots: blk.is_none().then(|| machine.cache_dir.clone()),
            blk_file: blk.as_ref().map(|(file, _)| file.path().to_owned()),
            icount: options.reproducible,
            cpus,
            ..prepared.qemu_spec(&machine.config, pm.path().to_owned())
        };
        Ok(TracingVm {
            machine: machine.clone(),
            prepared,
            spec,
            pm,
            blk,
            vm: None,
            used: false,
            links,
            symbols: SymbolSaver::default(),
        })
    }

    /// Records `command` after `setup` into `output` (with its initial image and symbols
    /// beside it). `setup`: shell commands run after mount, before tracing starts (e.g. to
    /// create files the traced commands work on; end with `sync` to make them durable).
    /// `command`: shell commands run in the guest, in /mnt, between `hypercall start` and
    /// `hypercall success` (exit code 0) or `hypercall fail`. The PM contents at `hypercall
    /// start` go next to `output` (`persim_trace::Recording`). On an error
    /// nothing of the recording is left.
    pub fn record(
        &mut self,
        setup: &str,
        command: &str,
        output: &Path,
    ) -> Result<TraceSummary, VmError> {
        let recorded = self.try_record(setup, command, output);
        if recorded.is_err() {
            self.vm = None;
            Recording::new(output).remove();
        }
        recorded
    }

    /// Shuts the guest down; returns how long that took.
    pub fn shutdown(mut self) -> Result<Duration, VmError> {
        let started = Instant::now();
        if let Some(vm) = self.vm.take() {
            vm.shutdown(self.machine.timeout)?;
        }
        Ok(started.elapsed())
    }

    fn say(&self, text: String) {
        if self.machine.progress {
            // A closed stderr (`persim … 2>&1 | head`) must not stop the run.
            let _ = writeln!(std::io::stderr(), "persim trace: {text}");
        }
    }

    fn try_record(
        &mut self,
        setup: &str,
        command: &str,
        output: &Path,
    ) -> Result<TraceSummary, VmError> {
        let timeout = self.machine.timeout;
        let pm_size = self.machine.config.pm_size();
        let config = &self.machine.config;
        // The setup commands, then the traced run.
        let recording: Vec<String> = [config.mkfs.as_str(), &config.mount, setup]
            .into_iter()
            .filter(|command| !command.trim().is_empty())
            .map(str::to_owned)
            .chain([traced_run_script(command)])
            .collect();
        let (traced_run, setup_commands) = recording.split_last().expect("the traced run");
        // The links first: a guest started now runs the whole recording at once.
        self.point_links_at(output)?;
        let boot = self.guest_with_blank_pm(&recording)?;
        let started = Instant::now();
        let vm = self
            .vm
            .as_mut()
            .expect("the guest was just booted or reset");
        for command in setup_commands {
            let out = vm.run(command, timeout)?;
            if out.exit_code != 0 {
                return Err(VmError::SetupFailed {
                    command: command.to_owned(),
                    exit_code: out.exit_code,
                    output: out.output,
                });
            }
        }
        let setup = started.elapsed();
        self.say(format!("setup {:.2} s", setup.as_secs_f64()));

        let started = Instant::now();
        let vm = self.vm.as_mut().expect("the guest runs");
        let out = vm.run_named(traced_run, "the traced run", timeout)?;
        let traced = started.elapsed();
        self.used = true;
        self.say(format!(
            "traced run {:.2} s (exit code {})",
            traced.as_secs_f64(),
            out.exit_code
        ));
        let vm = self.vm.as_mut().expect("the guest runs");
        let saved = self
            .symbols
            .save(vm, &self.prepared, &self.machine.cache_dir, output, timeout);
        if let Err(e) = saved {
            self.say(format!("no symbols for the trace: {e}"));
        }
        if self.blk.is_some() {
            // The next recording boots on a blank block device.
            self.vm = None;
        }
        Ok(TraceSummary {
            exit_code: out.exit_code,
            output: out.output,
            kernel_errors: out.kernel_errors,
            pm_base: PM_BASE,
            pm_size,
            boot,
            setup,
            traced,
            shutdown: Duration::ZERO,
        })
    }

    /// Boots the guest if it has none, else gives it a blank PM again; returns the boot
    /// time (zero without a boot). A guest started now runs `recording` (the recording's
    /// commands) at once, before any console input: so a test's first recording in a
    /// fresh guest runs the same instructions every time (docs/design/tracer.md,
    /// "Reproducibility").
    fn guest_with_blank_pm(&mut self, recording: &[String]) -> Result<Duration, VmError> {
        let timeout = self.machine.timeout;
        let mut boot = Duration::ZERO;
        if self.vm.is_none() {
            self.pm.clear()?;
            if let Some((blk, _)) = &self.blk {
                blk.clear()?;
            }
            self.say(format!(
                "booting {} (QEMU {}, kernel {})",
                self.machine.config.name,
                self.prepared.qemu_version,
                self.prepared.kernel.image.display()
            ));
            // A restored kernel knows the PM it was saved with, not this blank one.
            let reattach = self.spec.snapshots.is_some().then_some(REATTACH.to_owned());
            let first: Vec<String> = reattach
                .iter()
                .cloned()
                .chain([PM_RANGE.to_owned()])
                .chain(recording.iter().cloned())
                .collect();
            let started = Instant::now();
            let mut vm = Vm::boot_running(&self.spec, &first, self.machine.boot_timeout)?;
            boot = started.elapsed();
            self.say(format!(
                "{} {:.2} s",
                if vm.restored() { "restored" } else { "boot" },
                boot.as_secs_f64()
            ));
            if let Some(reattach) = &reattach {
                vm.run(reattach, timeout)?.succeeded(reattach)?;
            }
            check_pm_range(&mut vm, self.machine.config.pm_size(), timeout)?;
            self.used = false;
            self.vm = Some(vm);
        }
        if self.used {
            let vm = self.vm.as_mut().expect("the guest runs");
            // At / the earlier test's mount can go; detaching destroys pmem0 and its page
            // cache, so nothing of that test is seen through them either.
            vm.run("cd / && persim-pmem detach", timeout)?
                .succeeded("persim-pmem detach")?;
            self.pm.clear()?;
            vm.run("persim-pmem attach", timeout)?
                .succeeded("persim-pmem attach")?;
            self.used = false;
        }
        Ok(boot)
    }

    /// Points the plugin's trace and initial-image links at `output`'s.
    fn point_links_at(&self, output: &Path) -> Result<(), VmError> {
        let output = std::path::absolute(output)
            .map_err(|e| VmError::io(format!("the trace path {}", output.display()), e))?;
        let blk_link = self
            .blk
            .as_ref()
            .map(|(_, link)| (link, Recording::new(&output).initial_block_image()));
        for (link, target) in [
            (&self.links.0, output.clone()),
            (&self.links.1, Recording::new(&output).initial_image()),
        ]
        .into_iter()
        .chain(blk_link)
        {
            let _ = std::fs::remove_file(link);
            std::os::unix::fs::symlink(&target, link)
                .map_err(|e| VmError::io(format!("linking {}", link.display()), e))?;
        }
        Ok(())
    }
}

/// The plugin is told where PM is from the machine layout; the guest kernel's view of the
/// NVDIMM region (from the NFIT) must agree, or the trace would record the wrong memory.
fn check_pm_range(vm: &mut Vm, pm_size: u64, timeout: Duration) -> Result<(), VmError> {
    let out = vm.run(PM_RANGE, timeout)?;
    let mut values = out.output.lines().filter_map(|l| {
        let l = l.trim();
        match l.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => l.parse().ok(),
        }
    });
    match (values.next(), values.next()) {
        (Some(base), Some(size)) if base == PM_BASE && size == pm_size => Ok(()),
        (Some(base), Some(size)) => Err(VmError::Protocol(format!(
            "the guest sees the NVDIMM at {base:#x} (+{size:#x}), expected {PM_BASE:#x} (+{pm_size:#x})"
        ))),
        _ => Err(VmError::Protocol(format!("the guest has no NVDIMM region: {}", out.output))),
    }
}

/// Where the guest kernel sees the NVDIMM region: its base and size.
const PM_RANGE: &str = "cat /sys/bus/nd/devices/region0/resource /sys/bus/nd/devices/region0/size";
/// Gives a restored guest's kernel the PM it runs on (blank at the start): at / because
/// detaching destroys pmem0 with its mounts.
const REATTACH: &str = "cd / && persim-pmem detach && persim-pmem attach";

/// The guest script of the traced run of `command`.
fn traced_run_script(command: &str) -> String {
    TRACED_RUN
        .replace("@USER_MAPS@", USER_MAPS)
        .replace("@COMMAND@", &shell_quote(command))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traced_run_wraps_the_commands_once_between_hypercalls() {
        // Multi-line, as a test's operations are, and quoted: every line is the command's.
        let script = traced_run_script("echo '@COMMAND@'\nexit 3");
        let body: Vec<&str> = script.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(script.matches("exit 3").count(), 1, "{script}");
        assert_eq!(
            body,
            [
                "cd /mnt",
                "nvme_reset=/sys/class/nvme/nvme0/reset_controller",
                "[ -e $nvme_reset ] && sync",
                "hypercall start",
                "[ -e $nvme_reset ] && echo 1 >$nvme_reset",
                "user-maps record /tmp/persim-user-maps -- sh -c 'echo '\\''@COMMAND@'\\''",
                "exit 3'",
                "rc=$?",
                "if [ $rc -eq 0 ]; then hypercall success; else hypercall fail; fi",
                "exit $rc",
            ]
        );
    }
}
