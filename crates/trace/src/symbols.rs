//! The guest's code symbols, kept beside a recorded trace (`TRACE.symbols`), so that every
//! program counter and return address of the trace prints as `function+0xoff [module]`.
//!
//! The source is the guest kernel's own `/proc/kallsyms`: the Debian kernel ships no real
//! `System.map` (it is in the -dbg package), and kallsyms also places the loaded modules'
//! functions exactly, without re-creating the module loader's section layout from the
//! `.ko` files. User programs' functions come from their ELF symbol tables, placed where
//! the traced run had them mapped (the guest tool `user-maps`), with the file's name as the
//! module. The file is kallsyms' text form (`address type name [module]`), function
//! symbols only, zstd-compressed; names are kept as linked and shown demangled (Rust).
//!
//! User code adds optional `key=value` fields, which older files lack: a function's
//! `size=HEX` (ELF `st_size`: an address past it is in code the symbol table does not
//! name, shown as `file+0xoff`, not as a misleading `function+0xbig`), and a code
//! mapping's `bias=HEX` (run-time address − ELF address) and `file=PATH` (the file on
//! the host).

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Function symbols sorted by address, per address space: 0 holds the kernel's (and those
/// of a file that names none), n ≥ 1 the code of one user process of the traced run, as
/// `@n` after the module in the file: two processes may have different code at one
/// address (a program's library where another has its static executable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Symbols {
    spaces: Vec<Space>,
    sources: Sources,
}

/// The line tables of the user programs' files, read when first asked (None: the file, or
/// its separate debug file, has none).
#[derive(Default)]
struct Sources(Mutex<HashMap<String, Option<addr2line::Loader>>>);

impl Sources {
    /// Where the ELF address `address` of `file` is in its source.
    fn line_of(&self, file: &str, address: u64) -> Option<SourceLine> {
        let mut loaders = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let loader = loaders
            .entry(file.to_owned())
            .or_insert_with(|| line_tables(Path::new(file)))
            .as_ref()?;
        // The innermost frame: the inlined function the address is in, if any.
        let frame = loader.find_frames(address).ok()?.next().ok()??;
        let location = frame.location?;
        Some(SourceLine {
            file: Path::new(location.file?).file_name()?.to_str()?.to_owned(),
            line: location.line?,
            function: frame
                .function
                .and_then(|f| f.demangle().ok().map(|n| n.into_owned())),
        })
    }
}

/// A code address's place in its program's source, from the file's line tables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceLine {
    /// The source file's name, without its directory.
    pub file: String,
    pub line: u32,
    /// The function the line is in: the inlined one where the compiler inlined it.
    pub function: Option<String>,
}

impl fmt::Display for SourceLine {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The loader of `file`'s DWARF, or of its separate debug file
/// (`/usr/lib/debug/.build-id/xx/rest.debug`, Debian's `-dbgsym` packages); None without
/// line tables.
fn line_tables(file: &Path) -> Option<addr2line::Loader> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(file).ok()?;
    let elf = object::File::parse(&*data).ok()?;
    let path = match elf.section_by_name(".debug_line") {
        Some(section) if section.size() > 0 => file.to_owned(),
        _ => {
            let id: String = elf
                .build_id()
                .ok()??
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let debug = Path::new("/usr/lib/debug/.build-id")
                .join(id.get(..2)?)
                .join(format!("{}.debug", id.get(2..)?));
            debug.is_file().then_some(debug)?
        }
    };
    addr2line::Loader::new(path).ok()
}

/// Only a cache: symbols are equal, cloned and printed without it.
impl Clone for Sources {
    fn clone(&self) -> Sources {
        Sources::default()
    }
}

impl PartialEq for Sources {
    fn eq(&self, _: &Sources) -> bool {
        true
    }
}

impl Eq for Sources {}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Sources")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Space {
    functions: Vec<Function>,
    /// A user process's code mappings (`start m end [file] @n` lines), sorted: an address
    /// outside them is not this process's code. Empty for the kernel's space.
    code: Vec<Code>,
}

/// One code mapping of a user process.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Code {
    start: u64,
    end: u64,
    /// The mapped file's name (`code` in files written before it was kept).
    module: String,
    /// Run-time address − ELF address of the file's code, when the file says.
    bias: Option<u64>,
    /// The mapped file on the host, when the file says.
    file: Option<String>,
}

impl Space {
    fn code_at(&self, address: u64) -> Option<&Code> {
        let at = self.code.partition_point(|c| c.start <= address);
        let code = &self.code[at.checked_sub(1)?];
        (address < code.end).then_some(code)
    }

    fn has_code_at(&self, address: u64) -> bool {
        self.code_at(address).is_some()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Function {
    address: u64,
    /// As linked (what the file keeps).
    name: String,
    /// What is shown: the demangled name of a Rust function, else `name`.
    shown: Option<String>,
    module: Option<String>,
    /// ELF `st_size`, for user programs' functions (kallsyms has none).
    size: Option<u64>,
}

impl Function {
    fn new(address: u64, name: &str, module: Option<&str>, size: Option<u64>) -> Function {
        Function {
            address,
            name: name.to_owned(),
            shown: rustc_demangle::try_demangle(name)
                .ok()
                .map(|d| format!("{d:#}")),
            module: module.map(str::to_owned),
            size,
        }
    }
}

/// An address resolved: the function it lies in and how far into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location<'a> {
    pub function: &'a str,
    pub offset: u64,
    pub module: Option<&'a str>,
}

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}+{:#x}", self.function, self.offset)?;
        match self.module {
            Some(module) => write!(f, " [{module}]"),
            None => Ok(()),
        }
    }
}

/// The symbol nearest at or below `address` of `functions` (sorted by address).
fn nearest(functions: &[Function], address: u64) -> Option<&Function> {
    let at = functions.partition_point(|f| f.address <= address);
    functions.get(at.checked_sub(1)?)
}

/// Addresses further than this past the last symbol of their region are not resolved:
/// no function of the kernel or a module is this long.
const MAX_FUNCTION_SIZE: u64 = 1 << 20;

impl Symbols {
    /// Reads `/proc/kallsyms` text, keeping the function symbols (types t, T, w, W).
    /// Lines that are not symbols are skipped; addresses of 0 (kallsyms hides them from
    /// readers without the right) are not symbols either.
    pub fn from_kallsyms(text: &str) -> Symbols {
        let mut symbols = Symbols::default();
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let parsed = (|| {
                let address = u64::from_str_radix(fields.next()?, 16).ok()?;
                let kind = fields.next()?;
                let name = fields.next()?;
                let (mut module, mut space) = (None, 0);
                let (mut size, mut bias, mut file) = (None, None, None);
                for field in fields {
                    let hex = |v: &str| u64::from_str_radix(v, 16).ok();
                    if let Some(m) = field.strip_prefix('[') {
                        module = m.strip_suffix(']');
                    } else if let Some(n) = field.strip_prefix('@') {
                        space = n.parse().ok()?;
                    } else {
                        match field.split_once('=') {
                            Some(("size", v)) => size = Some(hex(v)?),
                            Some(("bias", v)) => bias = Some(hex(v)?),
                            Some(("file", v)) => file = Some(v.to_owned()),
                            _ => {}
                        }
                    }
                }
                if kind == "m" {
                    let end = u64::from_str_radix(name, 16).ok()?;
                    symbols.space_mut(space).code.push(Code {
                        start: address,
                        end,
                        module: module.unwrap_or("code").to_owned(),
                        bias,
                        file,
                    });
                    return None;
                }
                (address != 0 && matches!(kind, "t" | "T" | "w" | "W"))
                    .then(|| (space, Function::new(address, name, module, size)))
            })();
            if let Some((space, function)) = parsed {
                symbols.space_mut(space).functions.push(function);
            }
        }
        symbols.sort();
        symbols
    }

    fn space_mut(&mut self, space: usize) -> &mut Space {
        if self.spaces.len() <= space {
            self.spaces.resize_with(space + 1, Space::default);
        }
        &mut self.spaces[space]
    }

    fn sort(&mut self) {
        for space in &mut self.spaces {
            space.functions.sort_by_key(|f| f.address);
            space.code.sort();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of functions.
    pub fn len(&self) -> usize {
        self.spaces.iter().map(|s| s.functions.len()).sum()
    }

    /// The function `address` lies in: the nearest symbol at or below it, in the code of
    /// the first user process that has code there, else the kernel's (an address alone
    /// cannot say whose it is: [`Symbols::describe_frames`] can).
    pub fn resolve(&self, address: u64) -> Option<Location<'_>> {
        self.resolve_in(
            self.spaces_with_code_at(address).next().unwrap_or(0),
            address,
        )
    }

    /// The user spaces with code at `address`.
    fn spaces_with_code_at(&self, address: u64) -> impl Iterator<Item = usize> + '_ {
        (1..self.spaces.len()).filter(move |&s| self.spaces[s].has_code_at(address))
    }

    /// The function `address` lies in, in the user address space `space` where it has code
    /// there, else in the kernel's. Past the end of the nearest function below it (when
    /// its size is known), the address is in code no symbol names (a stripped library's
    /// internal functions): then the mapped file and the ELF address in it (the offset in
    /// the mapping without a bias), as `function` without a module.
    fn resolve_in(&self, space: usize, address: u64) -> Option<Location<'_>> {
        let space = match self.spaces.get(space) {
            Some(user) if user.has_code_at(address) => user,
            _ => self.spaces.first()?,
        };
        let f = nearest(&space.functions, address)?;
        let offset = address - f.address;
        if f.size.is_some_and(|size| offset >= size) {
            let code = space.code_at(address)?;
            return Some(Location {
                function: &code.module,
                offset: address.wrapping_sub(code.bias.unwrap_or(code.start)),
                module: None,
            });
        }
        (offset < MAX_FUNCTION_SIZE).then_some(Location {
            function: f.shown.as_deref().unwrap_or(&f.name),
            offset,
            module: f.module.as_deref(),
        })
    }

    /// `function+0xoff [module]`, with `(file:line)` where the user program's file has
    /// line tables; the hex address without a symbol. `call`: a return address, whose
    /// line is the call's (the byte before it).
    fn describe_in(&self, space: usize, address: u64, call: bool) -> String {
        let Some(location) = self.resolve_in(space, address) else {
            return format!("{address:#x}");
        };
        match self.line_in(space, address, call) {
            Some(line) => format!("{location} ({line})"),
            None => location.to_string(),
        }
    }

    /// The source line of `address` in user space `space`, where its file has line
    /// tables; `call` as in [`Symbols::describe_in`].
    fn line_in(&self, space: usize, address: u64, call: bool) -> Option<SourceLine> {
        let code = self
            .spaces
            .get(space)
            .filter(|s| s.has_code_at(address))?
            .code_at(address)?;
        let probe = address
            .wrapping_sub(code.bias?)
            .wrapping_sub(u64::from(call));
        self.sources.line_of(code.file.as_deref()?, probe)
    }

    /// The names of code files the guest had (user mappings' `file=`) moved to the
    /// host's, where `host` knows another path.
    pub fn move_files(&mut self, host: impl Fn(&str) -> Option<PathBuf>) {
        for code in self.spaces.iter_mut().flat_map(|s| &mut s.code) {
            if let Some(moved) = code.file.as_deref().and_then(&host) {
                code.file = Some(moved.display().to_string());
            }
        }
    }

    /// One call chain's addresses (a pc and its return addresses) described, each in
    /// the user address space that has code at most of them: one thread's frames are all
    /// of one process.
    pub fn describe_frames(&self, frames: &[u64]) -> Vec<String> {
        let space = self.space_of_frames(frames);
        frames
            .iter()
            .enumerate()
            .map(|(i, &a)| self.describe_in(space, a, i > 0))
            .collect()
    }

    /// One call chain's source lines (as [`Symbols::describe_frames`] names them): the
    /// pc's, then each call's; None where no line table covers the address. `pc_returns`:
    /// the pc is a return address too (a finding placed at a call site).
    pub fn source_lines(&self, frames: &[u64], pc_returns: bool) -> Vec<Option<SourceLine>> {
        let space = self.space_of_frames(frames);
        frames
            .iter()
            .enumerate()
            .map(|(i, &a)| self.line_in(space, a, pc_returns || i > 0))
            .collect()
    }

    /// The user address space that has code at most of `frames` (0 if none has).
    fn space_of_frames(&self, frames: &[u64]) -> usize {
        let covered = |space: usize| {
            frames
                .iter()
                .filter(|&&a| self.spaces[space].has_code_at(a))
                .count()
        };
        (1..self.spaces.len())
            .rev()
            .max_by_key(|&space| covered(space))
            .unwrap_or(0)
    }

    /// `function+0xoff [module] (file:line)`, or the address in hex when no symbol covers
    /// it.
    pub fn describe(&self, address: u64) -> String {
        let space = self.spaces_with_code_at(address).next().unwrap_or(0);
        self.describe_in(space, address, false)
    }

    /// The same symbols with each module's functions moved from its load address in `from`
    /// to the one in `to` (module name -> address, as `/proc/modules` gives them): a
    /// module's layout is fixed by its `.ko`, only its load address changes from boot to
    /// boot. Functions of a module missing from either map are dropped.
    pub fn with_modules_moved(
        &self,
        from: &HashMap<String, u64>,
        to: &HashMap<String, u64>,
    ) -> Symbols {
        let mut moved = self.clone();
        if let Some(kernel) = moved.spaces.first_mut() {
            kernel.functions.retain_mut(|f| {
                let Some(module) = &f.module else {
                    return true;
                };
                match (from.get(module), to.get(module)) {
                    (Some(old), Some(new)) => {
                        f.address = f.address.wrapping_sub(*old).wrapping_add(*new);
                        true
                    }
                    _ => false,
                }
            });
        }
        moved.sort();
        moved
    }

    /// Adds `other`'s functions (a traced run's user programs to the kernel's).
    pub fn extend(&mut self, other: Symbols) {
        for (n, space) in other.spaces.into_iter().enumerate() {
            let own = self.space_mut(n);
            own.functions.extend(space.functions);
            own.code.extend(space.code);
        }
        self.sort();
    }

    /// An entry's code location, innermost first: the function of its pc, then of each
    /// return address, joined by ` < `; None without metadata.
    pub fn describe_meta(&self, meta: &crate::Meta) -> Option<String> {
        let frames: Vec<u64> = meta.pc.iter().chain(&meta.stack).copied().collect();
        let places = self.describe_frames(&frames);
        (!places.is_empty()).then(|| places.join(" < "))
    }

    /// Writes the symbols file whole or not at all.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        for (n, space) in self.spaces.iter().enumerate() {
            let tag = if n > 0 {
                format!(" @{n}")
            } else {
                String::new()
            };
            for c in &space.code {
                text.push_str(&format!(
                    "{:016x} m {:016x} [{}]{tag}",
                    c.start, c.end, c.module
                ));
                if let Some(bias) = c.bias {
                    text.push_str(&format!(" bias={bias:x}"));
                }
                if let Some(file) = &c.file {
                    text.push_str(&format!(" file={file}"));
                }
                text.push('\n');
            }
            for f in &space.functions {
                text.push_str(&format!("{:016x} t {}", f.address, f.name));
                if let Some(module) = &f.module {
                    text.push_str(&format!("\t[{module}]"));
                }
                text.push_str(&tag);
                if let Some(size) = f.size {
                    text.push_str(&format!(" size={size:x}"));
                }
                text.push('\n');
            }
        }
        let compressed = zstd::encode_all(text.as_bytes(), 9)?;
        crate::atomic_file::write_atomically(path, &compressed)
    }

    pub fn load(path: &Path) -> std::io::Result<Symbols> {
        let file = std::fs::File::open(path)?;
        let mut text = String::new();
        zstd::Decoder::new(file)?.read_to_string(&mut text)?;
        Ok(Symbols::from_kallsyms(&text))
    }

    /// The symbols recorded beside `trace`, if any (none for traces written by hand or
    /// recorded before symbols were kept).
    pub fn of_trace(trace: &Path) -> Option<Symbols> {
        Symbols::load(&crate::Recording::new(trace).symbols()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff81000000 T startup_64
ffffffff81001000 t helper
ffffffff82000000 D some_data
ffffffffc0250000 t ext4_es_end\t[ext4]
ffffffffc0250100 T ext4_write_begin\t[ext4]
ffffffffc0300000 t jbd2_journal_commit_transaction\t[jbd2]
not a symbol line
";

    #[test]
    fn resolves_kernel_and_module_functions_with_offsets() {
        let s = Symbols::from_kallsyms(KALLSYMS);
        assert_eq!(s.len(), 6, "functions only: {s:?}");
        assert_eq!(s.describe(0xffffffff81001010), "helper+0x10");
        assert_eq!(
            s.describe(0xffffffffc0250123),
            "ext4_write_begin+0x23 [ext4]"
        );
        let commit = s.resolve(0xffffffffc0300000).unwrap();
        assert_eq!(
            (commit.function, commit.offset, commit.module),
            ("jbd2_journal_commit_transaction", 0, Some("jbd2"))
        );
        // Below the first symbol, or too far past the last: no function.
        assert_eq!(s.describe(0x401000), "0x401000");
        assert_eq!(s.describe(0xffffffffc0400000), "0xffffffffc0400000");
        // Aliases at one address: one of them, consistently.
        assert!(s.describe(0xffffffff81000004).ends_with("+0x4"));
        let meta = crate::Meta {
            pc: Some(0xffffffffc0300010),
            stack: vec![0xffffffffc0250104, 0x1234],
            task: None,
        };
        assert_eq!(
            s.describe_meta(&meta).unwrap(),
            "jbd2_journal_commit_transaction+0x10 [jbd2] < ext4_write_begin+0x4 [ext4] < 0x1234"
        );
        assert_eq!(s.describe_meta(&crate::Meta::default()), None);
    }

    #[test]
    fn modules_move_to_their_new_load_addresses() {
        let s = Symbols::from_kallsyms(KALLSYMS);
        let bases = |ext4: u64| -> HashMap<String, u64> {
            [
                ("ext4".to_owned(), ext4),
                ("jbd2".to_owned(), 0xffffffffc0300000),
            ]
            .into()
        };
        let moved = s.with_modules_moved(&bases(0xffffffffc0250000), &bases(0xffffffffc0100000));
        assert_eq!(
            moved.describe(0xffffffffc0100104),
            "ext4_write_begin+0x4 [ext4]"
        );
        assert_eq!(moved.describe(0xffffffff81001010), "helper+0x10");
        assert_eq!(
            moved.describe(0xffffffffc0300001),
            "jbd2_journal_commit_transaction+0x1 [jbd2]"
        );
        let without_jbd2: HashMap<String, u64> = [("ext4".to_owned(), 1)].into();
        assert_eq!(
            s.with_modules_moved(&without_jbd2, &without_jbd2).len(),
            s.len() - 1
        );
    }

    #[test]
    fn user_programs_join_the_kernel_and_rust_names_are_shown_demangled() {
        let mut s = Symbols::from_kallsyms(KALLSYMS);
        let user = Symbols::from_kallsyms(
            "0000555555556000 m 0000555555557000 [transfer] @1\n\
             0000555555556000 t main [transfer] @1\n\
             0000555555556100 t _ZN6fs_ops3run17h0123456789abcdefE [transfer] @1\n",
        );
        s.extend(user);
        assert_eq!(s.len(), 8);
        assert_eq!(s.describe(0x555555556010), "main+0x10 [transfer]");
        assert_eq!(s.describe(0x555555556108), "fs_ops::run+0x8 [transfer]");
        assert_eq!(s.describe(0xffffffff81001010), "helper+0x10");
        // Saved as linked, so the file reads back the same.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("symbols");
        s.save(&path).unwrap();
        assert_eq!(Symbols::load(&path).unwrap(), s);
    }

    #[test]
    fn each_call_chain_is_described_in_the_process_that_has_its_code() {
        // Process 1: a program with a library at 0x7f..; process 2: a static tool whose
        // code is at the same addresses.
        let s = Symbols::from_kallsyms(
            "0000555555556000 m 0000555555557000 [transfer] @1\n\
             0000555555556000 t main [transfer] @1\n\
             00007ffff7f76000 m 00007ffff7f78000 [libpmem.so.1] @1\n\
             00007ffff7f76700 t pmem_persist [libpmem.so.1] @1\n\
             00007ffff7f70000 m 00007ffff7f80000 [hypercall] @2\n\
             00007ffff7f70000 t _start [hypercall] @2\n\
             00007ffff7f76000 t tool_main [hypercall] @2\n\
             ffffffff81000000 T startup_64\n",
        );
        assert_eq!(
            s.describe_frames(&[0x7ffff7f76710, 0x555555556020]),
            ["pmem_persist+0x10 [libpmem.so.1]", "main+0x20 [transfer]"]
        );
        assert_eq!(
            s.describe_frames(&[0x7ffff7f76710, 0x7ffff7f70008]),
            ["tool_main+0x710 [hypercall]", "_start+0x8 [hypercall]"]
        );
        assert_eq!(s.describe_frames(&[0xffffffff81000004]), ["startup_64+0x4"]);
        // Alone, an address takes the first process with code there.
        assert_eq!(
            s.describe(0x7ffff7f76710),
            "pmem_persist+0x10 [libpmem.so.1]"
        );
        // Past the library's code, where only the tool has code.
        assert_eq!(s.describe(0x7ffff7f79000), "tool_main+0x3000 [hypercall]");
        // In no process's code and below the kernel: no name, not a wrong one.
        assert_eq!(s.describe_frames(&[0x7ffff7f90000]), ["0x7ffff7f90000"]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("symbols");
        s.save(&path).unwrap();
        assert_eq!(Symbols::load(&path).unwrap(), s);
    }

    /// A stripped library: `pmem_errormsg` is exported with its size, the code after it is
    /// internal; `main` of an old file has no size.
    const SIZED: &str = "\
00007ffff7f70000 m 00007ffff7f90000 [libpmemobj.so.1] @1 bias=7ffff7f60000 file=/usr/lib/libpmemobj.so.1
00007ffff7f76700 t pmemobj_errormsg [libpmemobj.so.1] @1 size=40
0000555555556000 m 0000555555557000 [transfer] @1
0000555555556000 t main [transfer] @1
";

    #[test]
    fn an_address_past_a_sized_symbol_is_named_by_its_file_and_offset() {
        let s = Symbols::from_kallsyms(SIZED);
        assert_eq!(
            s.describe(0x7ffff7f76710),
            "pmemobj_errormsg+0x10 [libpmemobj.so.1]"
        );
        // 0x760e past the symbol, far beyond its 0x40 bytes: the ELF address in the file.
        assert_eq!(s.describe(0x7ffff7f7dd0e), "libpmemobj.so.1+0x1dd0e");
        assert_eq!(
            s.describe_frames(&[0x7ffff7f7dd0e, 0x555555556020]),
            ["libpmemobj.so.1+0x1dd0e", "main+0x20 [transfer]"]
        );
        // Without a size (kallsyms, older files), as before: the nearest symbol.
        assert_eq!(s.describe(0x555555556f00), "main+0xf00 [transfer]");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("symbols");
        s.save(&path).unwrap();
        assert_eq!(Symbols::load(&path).unwrap(), s);
    }

    /// A C program built by `cc` with `flags` in `dir`, its symbols file (the program
    /// loaded at a PIE's bias) and the run-time address of its function `probe`.
    fn c_program(dir: &Path, flags: &[&str]) -> (Symbols, u64) {
        use object::{Object, ObjectSymbol};
        let source = dir.join("probe.c");
        std::fs::write(
            &source,
            "int probe(int x)\n{\n  return x * 3;\n}\nint main(void) { return probe(2); }\n",
        )
        .unwrap();
        let program = dir.join("probe");
        let status = std::process::Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&program)
            .arg(&source)
            .status()
            .expect("cc runs");
        assert!(status.success());
        let data = std::fs::read(&program).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let probe = elf.symbols().find(|s| s.name() == Ok("probe")).unwrap();
        let (address, size) = (probe.address(), probe.size());
        let bias = 0x555555554000;
        let text = format!(
            "{:016x} m {:016x} [probe] @1 bias={bias:x} file={}\n\
             {:016x} t probe [probe] @1 size={size:x}\n",
            bias + address,
            bias + address + size,
            program.display(),
            bias + address,
        );
        (Symbols::from_kallsyms(&text), bias + address)
    }

    #[test]
    fn user_code_with_line_tables_is_named_with_its_source_line() {
        let dir = tempfile::tempdir().unwrap();
        let (s, probe) = c_program(dir.path(), &["-g", "-O0"]);
        assert_eq!(s.describe(probe), "probe+0x0 [probe] (probe.c:2)");
        // As a return address, the line of the call before it.
        assert_eq!(
            s.describe_frames(&[probe, probe + 1]),
            [
                "probe+0x0 [probe] (probe.c:2)",
                "probe+0x1 [probe] (probe.c:2)"
            ]
        );
        // Saved and loaded, the file still finds the lines.
        let path = dir.path().join("symbols");
        s.save(&path).unwrap();
        assert_eq!(
            Symbols::load(&path).unwrap().describe(probe),
            "probe+0x0 [probe] (probe.c:2)"
        );
        // The same lines as values, with the function each is in.
        let line = |line| {
            Some(SourceLine {
                file: "probe.c".into(),
                line,
                function: Some("probe".into()),
            })
        };
        assert_eq!(
            s.source_lines(&[probe, probe + 1], false),
            [line(2), line(2)]
        );
        assert_eq!(s.source_lines(&[probe + 1], true), [line(2)]);
        assert_eq!(s.source_lines(&[0x1000], false), [None]);
        // Without DWARF, silently the function alone.
        let (s, probe) = c_program(dir.path(), &["-O0"]);
        assert_eq!(s.describe(probe), "probe+0x0 [probe]");
    }

    #[test]
    fn a_saved_file_loads_back_the_same_symbols() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.ptrace");
        let s = Symbols::from_kallsyms(KALLSYMS);
        s.save(&crate::Recording::new(&trace).symbols()).unwrap();
        assert_eq!(Symbols::of_trace(&trace), Some(s));
        assert_eq!(Symbols::of_trace(&dir.path().join("other")), None);
    }
}
