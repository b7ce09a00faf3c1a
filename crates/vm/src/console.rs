//! A running guest and the command protocol over its serial console (see init.sh): each
//! command is framed by begin/end markers that carry its id and exit code, so kernel
//! messages on the same console never get mistaken for a result.

use crate::error::VmError;
use crate::qemu::{QemuSpec, QEMU_BINARY};
use crate::scratch::ScratchPm;
use crate::snapshot::Qmp;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

const READY: &str = "@@PERSIM-READY";
/// The fw_cfg file with the commands a guest runs first (init.sh), and its first line,
/// which asks for `stay-busy` beside them under `-icount`.
const FIRST_COMMANDS: &str = "opt/persim/commands";
const FIRST_COMMANDS_HEADER: &str = "@@PERSIM-COMMANDS";
pub(crate) const BEGIN: &str = "@@PERSIM-BEGIN ";
pub(crate) const END: &str = "@@PERSIM-END ";
/// init.sh could not load a module (its name follows).
const MODULE_FAILED: &str = "@@PERSIM-MODULE-FAILED ";
/// init.sh or `persim-pmem attach` (extract/pmem.sh) could not give the NVDIMM DAX.
const FSDAX_FAILED: &str = "@@PERSIM-FSDAX-FAILED";
/// The framed command that powers the guest off; QEMU exits (-no-reboot).
const POWEROFF: &str = "poweroff -f";
const PANIC: &str = "Kernel panic - not syncing";
/// Console lines that start a kernel oops: the task that hit it is killed, possibly with
/// locks held, so the command may never end and the guest is not to be trusted.
const OOPS: [&str; 4] = [
    "BUG: ",
    "Oops: ",
    "general protection fault",
    "kernel BUG at ",
];
/// The line that ends an oops report.
const OOPS_END: &str = "---[ end trace ";
/// How long an oops report may pause before it counts as complete (a `BUG:` that is no
/// oops, e.g. "scheduling while atomic", has no end line).
const OOPS_QUIET: Duration = Duration::from_secs(2);
/// A kernel warning: the kernel carries on, and so does the command.
const WARNING: &str = "WARNING: CPU: ";
/// The call-trace entries an oops report keeps.
const CALLS_KEPT: usize = 12;
const LOG_LINES: usize = 60;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandOutput {
    pub exit_code: i32,
    /// Console lines between the markers (kernel messages printed meanwhile included).
    pub output: String,
    /// Kernel warnings seen while the command ran (an oops is an error: `VmError::GuestOops`).
    pub kernel_errors: Vec<String>,
}

impl CommandOutput {
    /// The output of a command that must succeed; its failure is the tool's, not a result.
    pub(crate) fn succeeded(self, command: &str) -> Result<CommandOutput, VmError> {
        if self.exit_code == 0 {
            return Ok(self);
        }
        Err(VmError::SetupFailed {
            command: command.to_owned(),
            exit_code: self.exit_code,
            output: self.output,
        })
    }
}

pub struct Vm {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    log: VecDeque<String>,
    next_id: u64,
    restored: bool,
    /// The commands given at the start (ids and scripts) whose results are still to come.
    first: VecDeque<(u64, String)>,
}

/// Makes the child get SIGKILL when the thread that starts it ends, however it ends: QEMU
/// does not exit when its stdin closes, so a `persim` killed mid-run would leave its guests
/// running (each a busy core under TCG).
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        let parent = libc::getpid();
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have gone before the call took effect.
            if libc::getppid() != parent {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
}

/// Starts `command` so that it dies with this process but not with the calling thread:
/// the death signal is tied to the thread that forks, so every child is forked by one
/// launcher thread that lives as long as the process. Guests are booted on passing
/// threads (a campaign's test threads) and used on others after those end.
fn spawn_for_process(command: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static LAUNCHER: std::sync::OnceLock<std::sync::Mutex<mpsc::Sender<Request>>> =
        std::sync::OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("persim-vm-launcher".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    die_with_parent(&mut command);
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("a thread can be started");
        std::sync::Mutex::new(tx)
    });
    let (reply, child) = mpsc::channel();
    let sent = launcher
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply));
    match sent {
        Ok(()) => child
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the launcher thread is gone"))),
        Err(_) => Err(std::io::Error::other("the launcher thread is gone")),
    }
}

/// How a guest with a QMP socket starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Boots, to be saved as a snapshot.
    Boot,
    /// Waits for a snapshot to load (`-incoming defer`).
    Incoming,
}

impl Vm {
    /// Starts QEMU and waits until the guest's init is ready for commands: restored from
    /// the booted snapshot of its kind where `spec.snapshots` allows (one is made first when
    /// there is none yet), else booted.
    pub fn boot(spec: &QemuSpec, timeout: Duration) -> Result<Vm, VmError> {
        Vm::boot_running(spec, &[], timeout)
    }

    /// [`Vm::boot`], and the guest runs `first` before it reads its console: `run` of
    /// these scripts, in this order, then only collects their results. Nothing from outside
    /// reaches the guest meanwhile, so under `-icount` they run the same instructions in
    /// every run of a guest restored from the same snapshot (docs/design/tracer.md,
    /// "Reproducibility"). They end at the first that fails.
    pub fn boot_running(
        spec: &QemuSpec,
        first: &[String],
        timeout: Duration,
    ) -> Result<Vm, VmError> {
        let Some(dir) = &spec.snapshots else {
            return Vm::start(spec, None, Some(first), timeout);
        };
        let snapshot = spec.snapshot_file(dir);
        if !snapshot.is_file() {
            Vm::make_snapshot(spec, &snapshot, timeout)?;
        }
        if snapshot.is_file() {
            let socket = Qmp::socket_path();
            let restored = Vm::start(spec, Some((&socket, Start::Incoming)), Some(first), timeout)
                .and_then(|mut vm| vm.restore(&socket, &snapshot, timeout).map(|()| vm));
            match restored {
                Ok(vm) => return Ok(vm),
                // A snapshot this QEMU cannot load (or a broken one): boot, and save anew
                // next time.
                Err(_) => drop(std::fs::remove_file(&snapshot)),
            }
        }
        Vm::start(spec, None, Some(first), timeout)
    }

    /// Boots a guest that waits for its first commands and saves it as `snapshot` (best
    /// effort: without one, guests boot). The guest is then killed: every guest that runs
    /// commands is restored, the first one too, so all start from the same state. It boots
    /// without the plugin and on a PM file of its own, which the snapshot leaves out, so
    /// that `spec`'s PM is as its owner left it.
    fn make_snapshot(spec: &QemuSpec, snapshot: &Path, timeout: Duration) -> Result<(), VmError> {
        let dir = snapshot.parent().unwrap_or(Path::new("."));
        let pm = ScratchPm::create(dir, spec.pm_size)?;
        let maker_spec = QemuSpec {
            pm_file: pm.path().to_owned(),
            plugin: None,
            ..spec.clone()
        };
        let socket = Qmp::socket_path();
        let maker = Vm::start(&maker_spec, Some((&socket, Start::Boot)), None, timeout);
        if maker.is_ok() {
            if let Ok(mut qmp) = Qmp::connect(&socket, timeout) {
                let _ = qmp.save(snapshot, timeout);
            }
        }
        let _ = std::fs::remove_file(&socket);
        maker.map(drop)
    }

    /// QEMU's CPU time so far, user and system, all its threads (`/proc/PID/stat`): what
    /// a benchmark compares on a shared host, where wall time also counts other tenants.
    #[cfg(feature = "testing")]
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // The fields after the command name start with the third, the state; utime and
        // stime are the 14th and 15th, in clock ticks.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let tick = |n: usize| fields.get(n)?.parse::<u64>().ok();
        let ticks = tick(11)? + tick(12)?;
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (per_second > 0).then(|| Duration::from_secs_f64(ticks as f64 / per_second as f64))
    }

    /// Whether this guest was restored from a booted snapshot rather than booted on its PM
    /// (its kernel then knows the NVDIMM it was saved with: attach it again before use).
    pub fn restored(&self) -> bool {
        self.restored
    }

    /// Loads the snapshot into this QEMU (started with `-incoming defer`) and checks that
    /// the guest answers.
    fn restore(
        &mut self,
        socket: &Path,
        snapshot: &Path,
        timeout: Duration,
    ) -> Result<(), VmError> {
        let restored =
            Qmp::connect(socket, timeout).and_then(|mut qmp| qmp.restore(snapshot, timeout));
        let _ = std::fs::remove_file(socket);
        restored?;
        self.restored = true;
        if self.first.is_empty() {
            self.run("true", timeout)?.succeeded("true")?;
        }
        Ok(())
    }

    /// Starts QEMU, with `qmp` a QMP socket and how the guest starts, and the commands the
    /// guest runs first (`None`: a guest that waits for them, to be saved as a snapshot);
    /// waits for the guest's init unless it is to be restored.
    fn start(
        spec: &QemuSpec,
        qmp: Option<(&Path, Start)>,
        first: Option<&[String]>,
        timeout: Duration,
    ) -> Result<Vm, VmError> {
        let mut command = Command::new(QEMU_BINARY);
        command.args(spec.args());
        let first: VecDeque<(u64, String)> = first
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(id, script)| (id as u64, script.clone()))
            .collect();
        if qmp.is_none_or(|(_, start)| start == Start::Incoming) {
            let busy = if spec.icount { " stay-busy" } else { "" };
            let mut commands = format!("{FIRST_COMMANDS_HEADER}{busy}\n");
            for (id, script) in &first {
                commands.push_str(&frame(*id, script));
            }
            command.arg("-fw_cfg");
            // QEMU's option syntax: a comma within a value is written twice.
            command.arg(format!(
                "name={FIRST_COMMANDS},string={}",
                commands.replace(',', ",,")
            ));
        }
        if let Some((socket, start)) = qmp {
            command.arg("-qmp");
            command.arg(format!("unix:{},server=on,wait=off", socket.display()));
            if start == Start::Incoming {
                command.args(["-incoming", "defer"]);
            }
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_for_process(command).map_err(|e| VmError::QemuFailed {
            message: format!("cannot start {QEMU_BINARY}: {e}"),
            log_tail: String::new(),
        })?;
        let (tx, lines) = mpsc::channel();
        forward_lines(
            child.stdout.take().expect("stdout is piped"),
            "",
            tx.clone(),
        );
        forward_lines(child.stderr.take().expect("stderr is piped"), "qemu: ", tx);
        let stdin = child.stdin.take().expect("stdin is piped");
        let mut vm = Vm {
            child,
            stdin,
            lines,
            log: VecDeque::new(),
            next_id: first.len() as u64,
            restored: false,
            first,
        };
        if matches!(qmp, Some((_, Start::Incoming))) {
            return Ok(vm);
        }
        let mut reports = Vec::new();
        vm.wait_for("boot", timeout, |line| {
            if line.contains(MODULE_FAILED) || line.contains(FSDAX_FAILED) {
                reports.push(line.to_owned());
            }
            Flow::done_if(line.contains(READY))
        })?;
        if let Some(message) = setup_failure(reports.iter().map(String::as_str)) {
            return Err(VmError::GuestSetup {
                message,
                log_tail: vm.log_tail(),
            });
        }
        Ok(vm)
    }

    /// Runs a shell script in the guest and returns its output and exit code.
    pub fn run(&mut self, script: &str, timeout: Duration) -> Result<CommandOutput, VmError> {
        let what = format!("command `{}`", first_line(script));
        self.run_named(script, &what, timeout)
    }

    /// `run`, with errors naming the script as `what` (its first line may say nothing).
    pub fn run_named(
        &mut self,
        script: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<CommandOutput, VmError> {
        let (id, first) = match self.first.front() {
            Some((id, first)) if first == script => {
                let id = *id;
                self.first.pop_front();
                (id, true)
            }
            _ => {
                // Console input would reach the guest while it runs its first commands.
                self.settle_first(timeout)?;
                let id = self.send(script).map_err(|e| VmError::QemuFailed {
                    message: format!("writing to the serial console: {e}"),
                    log_tail: self.log_tail(),
                })?;
                (id, false)
            }
        };
        let out = self.result_of(id, what, timeout)?;
        if first && out.exit_code != 0 {
            // The guest skips the first commands after one that fails.
            self.first.clear();
        }
        Ok(out)
    }

    /// Waits for the results of the first commands that have not been asked for.
    fn settle_first(&mut self, timeout: Duration) -> Result<(), VmError> {
        while let Some((id, script)) = self.first.pop_front() {
            let what = format!("command `{}`", first_line(&script));
            if self.result_of(id, &what, timeout)?.exit_code != 0 {
                self.first.clear();
            }
        }
        Ok(())
    }

    /// The output and exit code of the command `id`, named `what` in errors. A kernel oops
    /// ends the wait as soon as its report is complete, whether or not the command ended
    /// (a task that oopsed holding a lock leaves others stuck): `VmError::GuestOops`.
    fn result_of(
        &mut self,
        id: u64,
        what: &str,
        timeout: Duration,
    ) -> Result<CommandOutput, VmError> {
        let begin = format!("{BEGIN}{id}");
        let end = format!("{END}{id} ");
        self.wait_for(what, timeout, |line| Flow::done_if(line.contains(&begin)))?;
        let mut output = Vec::new();
        let mut kernel_errors = Vec::new();
        let mut exit_code = None;
        let mut oops = false;
        self.wait_for(what, timeout, |line| {
            if let Some(rest) = line.split(&end).nth(1) {
                exit_code = Some(rest.trim().parse::<i32>());
                return Flow::Done;
            }
            oops |= is_oops(line);
            if line.contains(WARNING) {
                kernel_errors.push(line.to_owned());
            }
            output.push(line.to_owned());
            match oops {
                true if line.contains(OOPS_END) => Flow::Done,
                true => Flow::UntilQuiet,
                false => Flow::Next,
            }
        })?;
        if oops {
            return Err(VmError::GuestOops {
                output: output.join("\n"),
            });
        }
        let exit_code = match exit_code {
            Some(Ok(code)) => code,
            _ => {
                return Err(VmError::Protocol(format!(
                    "malformed end marker for command {id}"
                )))
            }
        };
        Ok(CommandOutput {
            exit_code,
            output: output.join("\n"),
            kernel_errors,
        })
    }

    /// Sends `script` as the next framed command (see init.sh) and returns its id.
    fn send(&mut self, script: &str) -> std::io::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.stdin.write_all(frame(id, script).as_bytes())?;
        self.stdin.flush()?;
        Ok(id)
    }

    /// Powers the guest off and waits for QEMU to exit; kills it after `timeout`.
    pub fn shutdown(mut self, timeout: Duration) -> Result<(), VmError> {
        // Best effort: the guest may already be gone, which the wait below reports. No end
        // marker comes: the guest is gone before it could print one.
        let _ = self.send(POWEROFF);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(VmError::io("waiting for QEMU", e)),
            }
        }
        let _ = self.child.kill();
        Err(VmError::Timeout {
            phase: "shutdown".into(),
            seconds: timeout.as_secs(),
            log_tail: self.log_tail(),
        })
    }

    /// The last console lines, for error messages.
    pub fn log_tail(&self) -> String {
        self.log.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Forgets the console lines so far: later error messages show only what follows.
    pub fn clear_log(&mut self) {
        self.log.clear();
    }

    /// Feeds console lines to `next` until it says `Done`, or no line comes for
    /// OOPS_QUIET after it said `UntilQuiet`. A panic, QEMU's exit or the deadline end the
    /// wait with an error; on a deadline QEMU is killed.
    fn wait_for(
        &mut self,
        phase: &str,
        timeout: Duration,
        mut next: impl FnMut(&str) -> Flow,
    ) -> Result<(), VmError> {
        let deadline = Instant::now() + timeout;
        let mut quiet_ends = false;
        loop {
            let mut remaining = deadline.saturating_duration_since(Instant::now());
            if quiet_ends && remaining > OOPS_QUIET {
                remaining = OOPS_QUIET;
            }
            match self.lines.recv_timeout(remaining) {
                Ok(line) => {
                    if self.log.len() == LOG_LINES {
                        self.log.pop_front();
                    }
                    self.log.push_back(line.clone());
                    if line.contains(PANIC) {
                        let _ = self.child.kill();
                        self.drain_log(Duration::from_millis(500));
                        return Err(VmError::GuestPanic {
                            log_tail: self.log_tail(),
                        });
                    }
                    match next(&line) {
                        Flow::Done => return Ok(()),
                        Flow::Next => {}
                        Flow::UntilQuiet => quiet_ends = true,
                    }
                }
                Err(RecvTimeoutError::Timeout) if quiet_ends && Instant::now() < deadline => {
                    return Ok(());
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    return Err(VmError::Timeout {
                        phase: phase.to_owned(),
                        seconds: timeout.as_secs(),
                        log_tail: self.log_tail(),
                    });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(VmError::QemuFailed {
                        message: format!("QEMU exited ({status}) during {phase}"),
                        log_tail: self.log_tail(),
                    });
                }
            }
        }
    }

    /// Collects the rest of a dying guest's output (the panic's backtrace).
    fn drain_log(&mut self, wait: Duration) {
        while let Ok(line) = self.lines.recv_timeout(wait) {
            if self.log.len() == LOG_LINES {
                self.log.pop_front();
            }
            self.log.push_back(line);
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// What `Vm::wait_for` does after a console line.
enum Flow {
    /// Wait for the next line, until the deadline.
    Next,
    /// Stop waiting.
    Done,
    /// Wait for the next line, but stop waiting when none comes for OOPS_QUIET.
    UntilQuiet,
}

impl Flow {
    fn done_if(done: bool) -> Flow {
        match done {
            true => Flow::Done,
            false => Flow::Next,
        }
    }
}

/// Whether a console line starts a kernel oops.
fn is_oops(line: &str) -> bool {
    OOPS.iter().any(|marker| line.contains(marker))
}

/// The kernel's own copy, fill and checksum routines: an oops in one of them is the fault
/// of its caller, which a headline names instead (`kernel oops in nova_recover_inode_pages
/// (memcpy_erms)`).
const LIBRARY_ROUTINES: [&str; 12] = [
    "mem",
    "__mem",
    "str",
    "__str",
    "copy_",
    "__copy_",
    "_copy_",
    "clear_page",
    "__clear_user",
    "csum_",
    "crc32",
    "rep_",
];

/// The function an oops is blamed on, from the one it happened in (`RIP:`) and its
/// callers, innermost first: the first that is not a library routine, with the routine
/// it happened in beside it.
fn blamed(functions: &[String]) -> Option<String> {
    let routine = |f: &str| LIBRARY_ROUTINES.iter().any(|r| f.starts_with(r));
    let first = functions.first()?;
    match functions.iter().find(|f| !routine(f)) {
        Some(caller) if caller != first => Some(format!("{caller} ({first})")),
        _ => Some(first.clone()),
    }
}

/// What a person needs of a kernel oops in console text (kernel timestamps removed): a
/// first line naming the function it happened in (from `RIP:`, else the call trace; the
/// first caller outside the kernel's copy routines, [`blamed`]), the
/// report's headlines (`BUG:`, `Oops:`, `#PF:`), its `RIP:` and its call trace. Registers,
/// PIDs and code bytes are left out: two images that hit the same bug give the same text.
/// Text without an oops is returned as it is.
pub(crate) fn oops_report(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let Some(start) = lines.iter().position(|line| is_oops(line)) else {
        return text.to_owned();
    };
    let symbol = |entry: &str| {
        let entry = entry.trim_start_matches("RIP: ");
        let entry = entry.split_once(':').map_or(entry, |(_, rest)| rest);
        entry.split(['+', ' ']).next().unwrap_or("").to_owned()
    };
    let mut kept = Vec::new();
    let mut rip = None;
    let mut callers = Vec::new();
    let mut calls = None;
    for &line in &lines[start..] {
        if line.starts_with(OOPS_END) {
            break;
        }
        if let Some(count) = &mut calls {
            let entry = line.trim_start_matches("? ");
            // The trace ends with the task's end, or with the user registers of a system
            // call (`RIP: 0033:`), which differ from run to run.
            let end = ["</TASK>", "Modules linked in", "RIP: "];
            if end.iter().any(|e| line.starts_with(e)) {
                calls = None;
            } else if *count < CALLS_KEPT && entry == line && !line.starts_with('<') {
                *count += 1;
                callers.push(symbol(line));
                kept.push(format!(" {line}"));
            }
            continue;
        }
        let headline =
            is_oops(line) || line.starts_with("#PF:") || line.starts_with("invalid opcode:");
        if headline {
            kept.push(line.to_owned());
        } else if line.starts_with("RIP: ") && !kept.iter().any(|l| l.starts_with("RIP: ")) {
            rip = Some(symbol(line));
            kept.push(line.to_owned());
        } else if line.starts_with("Call Trace:") {
            calls = Some(0);
            kept.push(line.to_owned());
        }
    }
    let functions: Vec<String> = (rip.into_iter().chain(callers))
        .filter(|f| !f.is_empty())
        .collect();
    let first = match blamed(&functions) {
        Some(function) => format!("kernel oops in {function}"),
        None => "kernel oops".to_owned(),
    };
    std::iter::once(first)
        .chain(kept)
        .collect::<Vec<_>>()
        .join("\n")
}

fn forward_lines(stream: impl Read + Send + 'static, prefix: &'static str, tx: Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).split(b'\n') {
            let Ok(line) = line else { break };
            let text = String::from_utf8_lossy(&line);
            if tx
                .send(format!("{prefix}{}", text.trim_end_matches('\r')))
                .is_err()
            {
                break;
            }
        }
    });
}

/// `script` as the guest's init reads a command: "@@RUN <id>", base64 lines, ".".
fn frame(id: u64, script: &str) -> String {
    let mut message = format!("@@RUN {id}\n");
    for chunk in base64(script.as_bytes()).as_bytes().chunks(76) {
        message.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        message.push('\n');
    }
    message.push_str(".\n");
    message
}

/// What the guest reported it could not set up in these console lines (at boot, or in
/// the output of `persim-pmem attach`), as an error message; None if all went well.
pub(crate) fn setup_failure<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut modules = Vec::new();
    let mut fsdax = false;
    for line in lines {
        if let Some(module) = line.split(MODULE_FAILED).nth(1) {
            modules.push(module.trim().to_owned());
        }
        fsdax |= line.contains(FSDAX_FAILED);
    }
    let mut problems = Vec::new();
    if !modules.is_empty() {
        problems.push(format!(
            "the guest could not load kernel modules: {}",
            modules.join(", ")
        ));
    }
    if fsdax {
        problems.push(
            "the guest could not put the NVDIMM into fsdax mode (/dev/pmem0 without DAX, \
             see `persim-pmem fsdax`): the kernel needs ZONE_DEVICE and FS_DAX support, and \
             the configuration's `modules` the NVDIMM drivers (nfit, nd_pmem)"
                .to_owned(),
        );
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The first command of `script`, naming it in errors: comment lines are skipped.
fn first_line(script: &str) -> &str {
    script
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .unwrap_or("")
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state letter of /proc/PID/stat (after the parenthesised command name).
    fn process_state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(')').next()?.trim_start().chars().next()
    }

    #[test]
    fn children_outlive_the_thread_that_asked_for_them() {
        let child = std::thread::spawn(|| {
            let mut command = Command::new("sleep");
            command.arg("600");
            spawn_for_process(command).unwrap()
        })
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let state = process_state(child.id());
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        assert!(matches!(state, Some('S' | 'R')), "{state:?}");
    }

    #[test]
    fn children_are_killed_when_the_thread_that_started_them_ends() {
        let pid = std::thread::spawn(|| {
            let mut command = Command::new("sleep");
            command.arg("600");
            die_with_parent(&mut command);
            let child = command.spawn().unwrap();
            let pid = child.id();
            // Neither killed nor waited for by us: only the death signal can end it.
            std::mem::forget(child);
            pid
        })
        .join()
        .unwrap();
        // Killed, it stays a zombie of this process until reaped.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while process_state(pid) != Some('Z') && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(process_state(pid), Some('Z'), "sleep {pid} still runs");
        // SAFETY: reaps our own child.
        unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), 0) };
    }

    #[test]
    fn commands_are_framed_as_init_reads_them() {
        assert_eq!(frame(3, POWEROFF), "@@RUN 3\ncG93ZXJvZmYgLWY=\n.\n");
        let long = frame(0, &"x".repeat(100));
        let lines: Vec<&str> = long.lines().collect();
        assert_eq!(lines.len(), 4, "{long}");
        assert_eq!((lines[1].len(), lines[3]), (76, "."));
    }

    #[test]
    fn boot_reports_of_modules_and_fsdax_are_setup_failures() {
        assert_eq!(setup_failure(["[ 1.0] ok", "@@PERSIM-READY"]), None);
        let modules = setup_failure([
            "@@PERSIM-MODULE-FAILED nfit.ko",
            "@@PERSIM-MODULE-FAILED ext4.ko",
        ])
        .unwrap();
        assert!(modules.contains("modules: nfit.ko, ext4.ko"), "{modules}");
        let fsdax = setup_failure(["x", "@@PERSIM-FSDAX-FAILED"]).unwrap();
        assert!(
            fsdax.contains("fsdax mode") && !fsdax.contains("modules:"),
            "{fsdax}"
        );
    }

    /// A 6.1 kernel's oops as the worker has it (timestamps removed), from oops.ko.
    const OOPS_TEXT: &str = "sh: write error: Bad address\n\
        BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
        #PF: supervisor write access in kernel mode\n\
        #PF: error_code(0x0002) - not-present page\n\
        PGD 0 P4D 0 \n\
        Oops: 0002 [#1] PREEMPT SMP NOPTI\n\
        CPU: 0 PID: 97 Comm: sh Tainted: G           OE      6.1.0-56-amd64 #1  Debian 6.1.192-2\n\
        RIP: 0010:persim_oops_dereference+0x5/0x10 [oops]\n\
        Code: 00 00 00 00 <c7> 07 01 00 00 00\n\
        RSP: 0018:ffffc90000407e20 EFLAGS: 00000246\n\
        Call Trace:\n\
         <TASK>\n\
         ? __die_body.cold+0x1a/0x1f\n\
         persim_oops_write+0x1d/0x30 [oops]\n\
         proc_reg_write+0x56/0xa0\n\
         vfs_write+0xc3/0x3e0\n\
         RIP: 0033:0x47b7a0\n\
         RSP: 002b:00007fffffffe558 EFLAGS: 00000202 ORIG_RAX: 0000000000000001\n\
         </TASK>\n\
        Modules linked in: oops(OE) ext4\n\
        CR2: 0000000000000000\n\
        ---[ end trace 0000000000000000 ]---\n\
        RIP: 0010:persim_oops_dereference+0x5/0x10 [oops]";

    #[test]
    fn an_oops_report_keeps_its_headlines_function_and_calls_only() {
        assert_eq!(
            oops_report(OOPS_TEXT),
            "kernel oops in persim_oops_dereference\n\
             BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
             #PF: supervisor write access in kernel mode\n\
             #PF: error_code(0x0002) - not-present page\n\
             Oops: 0002 [#1] PREEMPT SMP NOPTI\n\
             RIP: 0010:persim_oops_dereference+0x5/0x10 [oops]\n\
             Call Trace:\n \
             persim_oops_write+0x1d/0x30 [oops]\n \
             proc_reg_write+0x56/0xa0\n \
             vfs_write+0xc3/0x3e0"
        );
        // another PID, registers and task: the same report
        let other = OOPS_TEXT
            .replace("PID: 97", "PID: 130")
            .replace("ffffc90000407e20", "ffffc9000040ff00");
        assert_eq!(oops_report(&other), oops_report(OOPS_TEXT));
        // without RIP, the call trace names the function
        let no_rip: String = OOPS_TEXT
            .lines()
            .filter(|l| !l.starts_with("RIP"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(oops_report(&no_rip).starts_with("kernel oops in persim_oops_write\n"));
        assert_eq!(oops_report("mount: no oops"), "mount: no oops");
        // An oops in a copy routine names its caller first.
        let in_memcpy = OOPS_TEXT.replace(
            "persim_oops_dereference+0x5/0x10 [oops]",
            "memcpy_erms+0x6/0x10",
        );
        assert!(
            oops_report(&in_memcpy).starts_with("kernel oops in persim_oops_write (memcpy_erms)\n"),
            "{}",
            oops_report(&in_memcpy)
        );
        assert!(is_oops("kernel BUG at fs/ext4/inode.c:1234!"));
        assert!(!is_oops("WARNING: CPU: 0 PID: 1 at fs/x.c:1"));
    }

    #[test]
    fn scripts_are_named_by_their_first_command() {
        assert_eq!(first_line("\n# what\n  cd /mnt\nls"), "cd /mnt");
        assert_eq!(first_line("# only a comment"), "");
    }

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b"poweroff -f\n"), "cG93ZXJvZmYgLWYK");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"echo 'x'\n"), "ZWNobyAneCcK");
    }
}
