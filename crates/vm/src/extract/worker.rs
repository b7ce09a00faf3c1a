//! One extraction worker: a guest and its scratch PM file. Per image: attach (rebind the
//! NVDIMM, or boot), set the clock to the recovery epoch and empty the kernel log,
//! `recover`, `fs-dump`, fetch the dump and the kernel log, unmount and detach. With `reads`, the guest runs with the tracing plugin
//! recording loads, and recovery and dump run between `hypercall start` and `hypercall
//! success`: one trace per image, whose loads give the PM words recovery read of the
//! image.

use super::{DumpOptions, ExtractMode, Extracted};
use crate::boot::Prepared;
use crate::console::{oops_report, setup_failure, CommandOutput, Vm, BEGIN, END};
use crate::error::VmError;
use crate::machine::Machine;
use crate::qemu::Plugin;
use crate::qemu::QemuSpec;
use crate::scratch::ScratchPm;
use persim_abi::machine::PM_BASE;
use persim_abi::{PluginArgs, RECOVERY_EPOCH};
use persim_state::Recovered;
use persim_trace::{Op, Reader};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const ATTACH: &str = "persim-pmem attach";
const DETACH: &str = "persim-pmem detach";
/// In the guest's tmpfs: the dump is fetched by a command of its own, so that nothing the
/// recovery or fs-dump print can mix with it.
const STATE_FILE: &str = "/tmp/persim-state.json";
/// In the guest's tmpfs: what the kernel logged during recovery and the dump, at every
/// level (the console shows errors only), fetched like the dump.
const KERNEL_LOG_FILE: &str = "/tmp/persim-kernel.log";
/// Prints a guest file (its placeholder: STATE_FILE, KERNEL_LOG_FILE) without kernel
/// messages inside it.
const FETCH: &str = include_str!("fetch-state.sh");
const READS_BEGIN: &str = "hypercall start";
const READS_END: &str = "hypercall success";
const WORD: u64 = 8;

pub(super) struct Worker {
    machine: Arc<Machine>,
    mode: ExtractMode,
    spec: QemuSpec,
    pm: ScratchPm,
    /// The NVMe namespace's file, with configurations that have one.
    blk: Option<ScratchPm>,
    /// The running guest; None until the first image and after a crash or hang.
    vm: Option<Vm>,
    /// With `reads`: the trace the plugin writes for each image.
    reads_trace: Option<PathBuf>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(trace) = &self.reads_trace {
            let _ = std::fs::remove_file(trace);
        }
    }
}

/// Why the steps for an image ended early.
enum Stop {
    /// The image's result is known: the guest crashed or hung (and is gone).
    Result(Recovered),
    /// The tool failed; extraction ends.
    Tool(VmError),
}

impl Worker {
    /// A worker for guests of `machine`, booted from `prepared`; with `reads`, its guests
    /// trace what recovery reads.
    pub(super) fn new(
        machine: Arc<Machine>,
        mode: ExtractMode,
        reads: bool,
        prepared: &Prepared,
    ) -> Result<Self, VmError> {
        let pm = ScratchPm::create(&machine.cache_dir, machine.config.pm_size())?;
        let mut spec = prepared.qemu_spec(&machine.config, pm.path().to_owned());
        let blk = match machine.config.blk_size() {
            0 => None,
            size => Some(ScratchPm::create(&machine.cache_dir, size)?),
        };
        spec.blk_file = blk.as_ref().map(|b| b.path().to_owned());
        // QEMU cannot migrate an NVMe controller, and a snapshot would not hold the disk.
        if mode == ExtractMode::ReuseGuest && blk.is_none() {
            // Restored guests detach the NVDIMM first and attach each image: a fresh boot
            // per image must boot on the image instead.
            spec.snapshots = Some(machine.cache_dir.clone());
        }
        let reads_trace = reads.then(|| pm.path().with_extension("reads"));
        if let Some(trace) = &reads_trace {
            spec.plugin = Some(Plugin {
                library: machine.artifacts.plugin.clone(),
                args: PluginArgs {
                    reads: true,
                    repeat: true,
                    ..PluginArgs::new(PM_BASE, machine.config.pm_size(), trace.clone())
                },
            });
        }
        Ok(Worker {
            machine,
            mode,
            spec,
            pm,
            blk,
            vm: None,
            reads_trace,
        })
    }

    /// The state recovered from `image` and printed by `dump`, or how recovery failed, with
    /// `reads` the PM words recovery read of it (None when the guest crashed or hung), and
    /// the kernel log of a recovery that succeeded.
    pub(super) fn extract(
        &mut self,
        image: &Path,
        dump: &DumpOptions,
    ) -> Result<Extracted, VmError> {
        let result = self.steps(image, dump);
        if self.mode == ExtractMode::FreshBoot {
            self.vm = None;
        }
        match result {
            Ok(done) => Ok(done),
            Err(Stop::Result(state)) => Ok(Extracted {
                state,
                words_read: None,
                kernel_log: Vec::new(),
            }),
            Err(Stop::Tool(e)) => Err(e),
        }
    }

    fn steps(&mut self, image: &Path, dump: &DumpOptions) -> Result<Extracted, Stop> {
        let deadline = match self.mode {
            ExtractMode::ReuseGuest => {
                self.detached_guest().map_err(Stop::Tool)?;
                self.load(image).map_err(Stop::Tool)?;
                let deadline = Instant::now() + self.machine.timeout;
                self.vm_mut().clear_log();
                let out = self.run(ATTACH, deadline)?;
                if let Some(message) = setup_failure(out.output.lines()) {
                    return Err(Stop::Tool(VmError::GuestSetup {
                        message,
                        log_tail: out.output,
                    }));
                }
                out.succeeded(ATTACH).map_err(Stop::Tool)?;
                deadline
            }
            ExtractMode::FreshBoot => {
                self.load(image).map_err(Stop::Tool)?;
                let vm = Vm::boot(&self.spec, self.machine.boot_timeout).map_err(vm_failure)?;
                self.vm = Some(vm);
                self.vm_mut().clear_log();
                Instant::now() + self.machine.timeout
            }
        };
        // Every recovery runs on the same clock, whatever the guest's age: the timestamps it
        // writes do not tell images apart, and the state marks them (`Recovered::state`).
        // The kernel log is emptied with it: what it holds next is this image's.
        let clock = format!("date -s @{RECOVERY_EPOCH} >/dev/null && dmesg -c >/dev/null");
        self.run(&clock, deadline)?
            .succeeded(&clock)
            .map_err(Stop::Tool)?;
        if let Some(trace) = &self.reads_trace {
            // A trace of an earlier image must not stand in for this one's.
            let _ = std::fs::remove_file(trace);
            let out = self.run(READS_BEGIN, deadline)?;
            out.succeeded(READS_BEGIN).map_err(Stop::Tool)?;
        }
        let state = self.recover_and_dump(dump, deadline)?;
        let kernel_log = match state.is_error() {
            true => Vec::new(),
            false => self.kernel_log(deadline)?,
        };
        let words_read = match self.reads_trace.clone() {
            Some(trace) => {
                let out = self.run(READS_END, deadline)?;
                out.succeeded(READS_END).map_err(Stop::Tool)?;
                Some(words_read(&trace).map_err(Stop::Tool)?)
            }
            None => None,
        };
        if self.run(DETACH, deadline)?.exit_code != 0 {
            // The state stands; the next image gets a fresh guest.
            self.vm = None;
        }
        Ok(Extracted {
            state,
            words_read,
            kernel_log,
        })
    }

    /// The kernel's messages since the clock was set, without their timestamps.
    fn kernel_log(&mut self, deadline: Instant) -> Result<Vec<String>, Stop> {
        let fetch = FETCH.replace("@STATE_FILE@", KERNEL_LOG_FILE);
        let out = self.run(&format!("dmesg -c >{KERNEL_LOG_FILE}\n{fetch}"), deadline)?;
        let out = out
            .succeeded("fetching the kernel log")
            .map_err(Stop::Tool)?;
        Ok(normalise(&out.output)
            .lines()
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Puts `image` (PM, then the block device if there is one) into the guest's files.
    fn load(&mut self, image: &Path) -> Result<(), VmError> {
        self.pm.load(image, 0)?;
        if let Some(blk) = &mut self.blk {
            blk.load(image, self.machine.config.pm_size())?;
        }
        Ok(())
    }

    /// Boots the worker's guest if it has none (on an all-zero PM) and detaches the NVDIMM.
    fn detached_guest(&mut self) -> Result<(), VmError> {
        if self.vm.is_some() {
            return Ok(());
        }
        self.pm.clear()?;
        if let Some(blk) = &self.blk {
            blk.clear()?;
        }
        let mut vm = Vm::boot(&self.spec, self.machine.boot_timeout)?;
        vm.run(DETACH, self.machine.boot_timeout)?
            .succeeded(DETACH)?;
        self.vm = Some(vm);
        Ok(())
    }

    fn recover_and_dump(
        &mut self,
        dump: &DumpOptions,
        deadline: Instant,
    ) -> Result<Recovered, Stop> {
        let machine = Arc::clone(&self.machine);
        let recover = self.run(&machine.config.recover, deadline)?;
        if recover.exit_code != 0 {
            return Ok(Recovered::RecoveryError {
                output: normalise(&recover.output),
            });
        }
        let dump = dump.command(STATE_FILE);
        let out = self.run(&format!("rm -f {STATE_FILE}\n{dump}"), deadline)?;
        if out.exit_code != 0 {
            return Ok(Recovered::RecoveryError {
                output: normalise(&format!(
                    "`{dump}` failed with exit code {}:\n{}",
                    out.exit_code, out.output
                )),
            });
        }
        let out = self.run(&FETCH.replace("@STATE_FILE@", STATE_FILE), deadline)?;
        let out = out
            .succeeded("fetching the fs-dump output")
            .map_err(Stop::Tool)?;
        Ok(Recovered::state(&out.output))
    }

    /// Runs a step of an image in the guest. A kernel warning, an oops (as soon as its
    /// report is complete), a panic, QEMU's exit or the deadline decide the image's
    /// result, and the guest is discarded.
    fn run(&mut self, script: &str, deadline: Instant) -> Result<CommandOutput, Stop> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        match self.vm_mut().run(script, timeout) {
            Ok(out) if out.kernel_errors.is_empty() => Ok(out),
            Ok(out) => {
                self.vm = None;
                Err(Stop::Result(Recovered::GuestCrash {
                    output: normalise(&out.output),
                }))
            }
            Err(e) => {
                self.vm = None;
                Err(match e {
                    VmError::QemuFailed { message, log_tail } => {
                        Stop::Result(Recovered::GuestCrash {
                            output: normalise(&format!("{message}\n{log_tail}")),
                        })
                    }
                    e => vm_failure(e),
                })
            }
        }
    }

    fn vm_mut(&mut self) -> &mut Vm {
        self.vm
            .as_mut()
            .expect("steps of an image run while the worker has a guest")
    }
}

/// The aligned 8-byte PM words a trace loads before it stores to them: what recovery read
/// of the image, not what it wrote itself. A word only partly stored counts as unwritten.
fn words_read(trace: &Path) -> Result<Vec<u64>, VmError> {
    let context = || format!("reading the loads of recovery in {}", trace.display());
    let reader =
        Reader::open(trace).map_err(|e| VmError::io(context(), std::io::Error::other(e)))?;
    let words = |addr: u64, len: u64| addr / WORD..=(addr + len.max(1) - 1) / WORD;
    let mut read = BTreeSet::new();
    let mut written = HashSet::new();
    for entry in reader {
        let entry = entry.map_err(|e| VmError::io(context(), std::io::Error::other(e)))?;
        match entry.op {
            Op::Read { addr, size } => read.extend(
                words(addr, size)
                    .filter(|w| !written.contains(w))
                    .map(|w| w * WORD),
            ),
            Op::Write { addr, data, .. } => {
                let end = addr + data.len() as u64;
                let whole = |w: &u64| w * WORD >= addr && (w + 1) * WORD <= end;
                written.extend(words(addr, data.len() as u64).filter(whole));
            }
            _ => {}
        }
    }
    Ok(read.into_iter().collect())
}

/// An oops, a panic or a hang is the image's result; anything else is the tool's failure.
fn vm_failure(e: VmError) -> Stop {
    match e {
        VmError::GuestOops { output } => Stop::Result(Recovered::GuestCrash {
            output: oops_report(&normalise(&output)),
        }),
        VmError::GuestPanic { log_tail } => Stop::Result(Recovered::GuestCrash {
            output: normalise(&log_tail),
        }),
        VmError::Timeout {
            phase, log_tail, ..
        } => Stop::Result(Recovered::Hang {
            output: normalise(&format!("no answer during {phase}\n{log_tail}")),
        }),
        e => Stop::Tool(e),
    }
}

/// Console text without what differs between runs of the same image: kernel timestamps
/// and the protocol's markers (their ids count the guest's commands).
fn normalise(text: &str) -> String {
    text.lines()
        .filter(|line| !line.starts_with(BEGIN) && !line.starts_with(END))
        .map(without_timestamp)
        .collect::<Vec<_>>()
        .join("\n")
}

/// "[   12.345678] EXT4-fs ..." -> "EXT4-fs ..."
fn without_timestamp(line: &str) -> &str {
    let Some((stamp, text)) = line.strip_prefix('[').and_then(|l| l.split_once("] ")) else {
        return line;
    };
    let stamp = stamp.trim_start();
    let is_time = !stamp.is_empty() && stamp.chars().all(|c| c.is_ascii_digit() || c == '.');
    if is_time {
        text
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_output_drops_timestamps_and_markers_only() {
        let text = "@@PERSIM-BEGIN 7\n\
                    [    3.059813] EXT4-fs (pmem0): VFS: Can't find ext4 filesystem\n\
                    mount: mounting /dev/pmem0 on /mnt failed: Invalid argument\n\
                    [x] kept\n\
                    @@PERSIM-END 7 255";
        assert_eq!(
            normalise(text),
            "EXT4-fs (pmem0): VFS: Can't find ext4 filesystem\n\
             mount: mounting /dev/pmem0 on /mnt failed: Invalid argument\n\
             [x] kept"
        );
    }

    #[test]
    fn oopses_panics_and_hangs_are_results_other_failures_are_not() {
        let panic = VmError::GuestPanic {
            log_tail: "[ 1.5] Kernel panic - not syncing: x".into(),
        };
        assert!(matches!(
            vm_failure(panic),
            Stop::Result(Recovered::GuestCrash { output }) if output == "Kernel panic - not syncing: x"
        ));
        let hang = VmError::Timeout {
            phase: "command `mount`".into(),
            seconds: 3,
            log_tail: "[ 2.0] stuck".into(),
        };
        assert!(matches!(
            vm_failure(hang),
            Stop::Result(Recovered::Hang { output }) if output == "no answer during command `mount`\nstuck"
        ));
        let oops = VmError::GuestOops {
            output: "[ 3.1] BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
                     [ 3.1] RIP: 0010:f+0x5/0x10 [m]\n[ 3.1] RSP: 0018:ffffc90000407e20"
                .into(),
        };
        assert!(matches!(
            vm_failure(oops),
            Stop::Result(Recovered::GuestCrash { output }) if output == "kernel oops in f\n\
                BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
                RIP: 0010:f+0x5/0x10 [m]"
        ));
        let broken = VmError::Protocol("bad".into());
        assert!(matches!(vm_failure(broken), Stop::Tool(_)));
    }
}
