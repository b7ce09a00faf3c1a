//! Where the traced run's programs had their code, and the functions in it, so that user
//! program counters and return addresses of a trace print as `function+0xoff [program]`
//! (the kernel's come from kallsyms: docs/design/tracer.md, "Symbols").
//!
//! A process's mappings are gone when it has exited, and the host only asks after the
//! traced run. So `user-maps record` runs the run's command under ptrace, following every
//! fork, clone and exec, and reads `/proc/PID/maps` at each thread's exit stop (before the
//! kernel tears the address space down). ptrace stops cost a few context switches per
//! process and store nothing to PM, so the trace is the same as without it. Afterwards
//! `user-maps symbols` reads the ELF symbol tables of the mapped files and prints their
//! functions at their run-time addresses, in kallsyms' text form, which the host already
//! reads.

use object::elf::PF_X;
use object::{Object, ObjectSegment, ObjectSymbol, SegmentFlags, SymbolKind};
use std::collections::BTreeSet;
use std::ffi::CString;
use std::fmt::Write as _;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The page size of x86-64 mappings.
const PAGE: u64 = 4096;

/// One executable, file-backed mapping of a `/proc/PID/maps` line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The file offset mapped at `start`.
    pub offset: u64,
    pub path: String,
}

impl Mapping {
    /// A maps line (`start-end perms offset dev inode path`) that maps a file's code;
    /// `None` for data, anonymous memory, `[vdso]` and the like.
    pub fn parse(line: &str) -> Option<Mapping> {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let perms = fields.next()?;
        let offset = fields.next()?;
        let path = fields.nth(2)?;
        (perms.contains('x') && path.starts_with('/')).then_some(())?;
        Some(Mapping {
            start: u64::from_str_radix(start, 16).ok()?,
            end: u64::from_str_radix(end, 16).ok()?,
            offset: u64::from_str_radix(offset, 16).ok()?,
            path: path.to_owned(),
        })
    }

    /// The line `record` keeps for this mapping, which [`Mapping::parse`] reads back.
    pub fn to_line(&self) -> String {
        format!(
            "{:x}-{:x} r-xp {:x} 00:00 0 {}",
            self.start, self.end, self.offset, self.path
        )
    }

    /// The functions of the mapped ELF file `data` that lie in this mapping, at their
    /// run-time addresses, as kallsyms lines of address space `space` (`address t name
    /// [file name] @space size=HEX`, after the mapping's own `start m end [file name]
    /// @space bias=HEX file=PATH`, as persim_trace::Symbols reads them); names stay
    /// as the symbol table spells them (the host demangles). The symbol table, else the
    /// dynamic one (a stripped library keeps its exported functions there).
    pub fn kallsyms_lines(&self, data: &[u8], space: usize) -> Result<String, String> {
        let file = object::File::parse(data).map_err(|e| format!("{}: {e}", self.path))?;
        // The load bias: the mapping starts at the page of the segment it maps, so that
        // segment's offset and address say where its bytes are now. Two segments may
        // share a page: the one with code is the one mapped executable.
        let segment = file
            .segments()
            .filter(|s| {
                let (at, size) = s.file_range();
                (at & !(PAGE - 1)..at + size).contains(&self.offset)
            })
            .max_by_key(
                |s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & PF_X != 0),
            )
            .ok_or_else(|| format!("{}: no segment holds offset {:#x}", self.path, self.offset))?;
        let (segment_offset, _) = segment.file_range();
        let bias = (self.start + segment_offset)
            .wrapping_sub(self.offset)
            .wrapping_sub(segment.address());
        let module = Path::new(&self.path)
            .file_name()
            .map_or(self.path.as_str(), |n| n.to_str().unwrap_or("?"));
        let symbols = if file.symbols().next().is_some() {
            file.symbols()
        } else {
            file.dynamic_symbols()
        };
        // The bias and the file let the host read the file's line tables; the sizes tell
        // a function from the unnamed code after it (a stripped library's internals).
        let mut out = format!(
            "{:016x} m {:016x} [{module}] @{space} bias={bias:x} file={}\n",
            self.start, self.end, self.path
        );
        for symbol in symbols {
            let address = symbol.address().wrapping_add(bias);
            let name = symbol.name().unwrap_or("");
            if symbol.kind() == SymbolKind::Text
                && symbol.is_definition()
                && symbol.address() != 0
                && !name.is_empty()
                && (self.start..self.end).contains(&address)
            {
                let _ = write!(out, "{address:016x} t {name} [{module}] @{space}");
                let _ = match symbol.size() {
                    0 => writeln!(out),
                    size => writeln!(out, " size={size:x}"),
                };
            }
        }
        Ok(out)
    }
}

/// The executable file mappings of a `/proc/PID/maps` text.
pub fn executable_mappings(maps: &str) -> Vec<Mapping> {
    maps.lines().filter_map(Mapping::parse).collect()
}

/// The code of each distinct address space `record` saw: what one process had mapped.
pub type Spaces = BTreeSet<Vec<Mapping>>;

/// `spaces` as `record` saves them: their maps lines, a blank line after each space.
pub fn spaces_to_text(spaces: &Spaces) -> String {
    spaces
        .iter()
        .map(|space| space.iter().map(|m| m.to_line() + "\n").collect::<String>() + "\n")
        .collect()
}

/// What [`spaces_to_text`] wrote, in its order (space n ≥ 1 is the n-th).
pub fn spaces_from_text(text: &str) -> Vec<Vec<Mapping>> {
    text.split("\n\n")
        .map(executable_mappings)
        .filter(|space| !space.is_empty())
        .collect()
}

/// Runs `argv` under ptrace, following its children, and returns its exit status (128 +
/// the signal if a signal ended it, as a shell says) with the executable mappings each
/// process (or thread) had when it exited before the command did.
pub fn run_recording_mappings(argv: &[CString]) -> io::Result<(i32, Spaces)> {
    let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: fork in a single-threaded tool; the child only calls async-signal-safe
    // functions (signal, ptrace, raise, execvp, _exit) before it execs.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        // SAFETY: see above; `pointers` is a NULL-terminated array of C strings.
        unsafe {
            // Rust's runtime ignores SIGPIPE, and exec keeps an ignored signal ignored: the
            // command gets the default back, as a shell would give it.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            libc::execvp(pointers[0], pointers.as_ptr());
            libc::_exit(127);
        }
    }
    let options = libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_TRACEEXIT;
    let mut started = BTreeSet::new();
    let mut live = BTreeSet::from([child]);
    let mut spaces = Spaces::new();
    let mut exit_status = None;
    while !live.is_empty() {
        let mut status = 0;
        // SAFETY: plain wait for any traced child, threads included (__WALL).
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if pid < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            live.remove(&pid);
            if pid == child {
                exit_status = Some(if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                });
                // The command is over, as for a shell: what it left running in the
                // background goes on, untraced, once this tracer exits.
                break;
            }
            continue;
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        live.insert(pid);
        let signal = libc::WSTOPSIG(status);
        let event = status >> 16;
        let mut deliver = 0;
        if started.insert(pid) && signal == libc::SIGSTOP {
            // A new process or thread starts with a SIGSTOP of ptrace's own (the first
            // child with the one it raised): it is not the program's.
            if pid == child {
                // SAFETY: the child is in a ptrace stop.
                unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, options) };
            }
        } else if event == libc::PTRACE_EVENT_EXIT {
            if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
                spaces.insert(executable_mappings(&maps));
            }
        } else if matches!(
            event,
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE
        ) {
            // The new process or thread is traced from now on (its first stop may come
            // later than this one).
            let mut new_pid: libc::c_ulong = 0;
            // SAFETY: `pid` is in a ptrace event stop; the message is the new pid.
            if unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, pid, 0, &mut new_pid) } == 0 {
                live.insert(new_pid as libc::pid_t);
            }
        } else if event == 0 {
            // A signal for the program: pass it on.
            deliver = signal;
        }
        // SAFETY: `pid` is in a ptrace stop; a failure means it is gone.
        unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, deliver) };
    }
    Ok((exit_status.unwrap_or(127), spaces))
}

/// `path` as a C string for exec.
pub fn c_string(arg: &std::ffi::OsStr) -> io::Result<CString> {
    CString::new(arg.as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_file_backed_code_is_kept() {
        let maps = "\
555555554000-555555556000 r--p 00000000 fe:01 1311 /usr/bin/transfer
555555556000-555555557000 r-xp 00002000 fe:01 1311 /usr/bin/transfer
7ffff7fc3000-7ffff7fc7000 r--p 00000000 00:00 0 [vvar]
7ffff7fc7000-7ffff7fc9000 r-xp 00000000 00:00 0 [vdso]
7ffff7e00000-7ffff7e80000 r-xp 00000000 00:00 0
7ffff7d00000-7ffff7d80000 r-xp 00028000 fe:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
";
        let kept = executable_mappings(maps);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(
            kept[0],
            Mapping {
                start: 0x555555556000,
                end: 0x555555557000,
                offset: 0x2000,
                path: "/usr/bin/transfer".into()
            }
        );
        assert_eq!(kept[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(Mapping::parse(&kept[1].to_line()).as_ref(), Some(&kept[1]));
        let spaces = Spaces::from([kept.clone(), kept[1..].to_vec()]);
        let read = spaces_from_text(&spaces_to_text(&spaces));
        assert_eq!(read, spaces.into_iter().collect::<Vec<_>>());
    }

    #[inline(never)]
    fn a_function_to_find() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn this_test_binary_finds_its_own_function_at_its_run_time_address() {
        let address = a_function_to_find as fn() -> u64 as usize as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mapping = executable_mappings(&maps)
            .into_iter()
            .find(|m| (m.start..m.end).contains(&address))
            .expect("the test's code is mapped from its file");
        let data = std::fs::read(&mapping.path).unwrap();
        let lines = mapping.kallsyms_lines(&data, 3).unwrap();
        let module = Path::new(&mapping.path)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        let first = lines.lines().next().unwrap();
        assert!(
            first.starts_with(&format!(
                "{:016x} m {:016x} [{module}] @3 bias=",
                mapping.start, mapping.end
            )),
            "{first}"
        );
        assert!(
            first.ends_with(&format!(" file={}", mapping.path)),
            "{first}"
        );
        let line = lines
            .lines()
            .find(|l| l.contains("a_function_to_find"))
            .unwrap_or_else(|| panic!("no symbol for the function in {} lines", lines.len()));
        assert_eq!(
            line.split_whitespace().next(),
            Some(format!("{address:016x}").as_str()),
            "{line}"
        );
        assert!(line.contains(&format!("[{module}] @3 size=")), "{line}");
    }
}
