//! The guest's code symbols, kept beside a recorded trace (`TRACE.symbols`), so that every
//! program counter and return address of the trace prints as `function+0xoff [module]`.
//!
//! The source is the guest kernel's own `/proc/kallsyms`: the Debian kernel ships no real
//! `System.map` (it is in the -dbg package), and kallsyms also places the loaded modules'
//! functions exactly, without re-creating the module loader's section layout from the
//! `.ko` files. The file is kallsyms' text form (`address type name [module]`), function
//! symbols only, zstd-compressed.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The symbols file of a trace, next to it.
pub fn symbols_path(trace: &Path) -> PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".symbols");
    name.into()
}

/// Function symbols sorted by address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Symbols {
    functions: Vec<Function>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Function {
    address: u64,
    name: String,
    module: Option<String>,
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

/// Addresses further than this past the last symbol of their region are not resolved:
/// no function of the kernel or a module is this long.
const MAX_FUNCTION_SIZE: u64 = 1 << 20;

impl Symbols {
    /// Reads `/proc/kallsyms` text, keeping the function symbols (types t, T, w, W).
    /// Lines that are not symbols are skipped; addresses of 0 (kallsyms hides them from
    /// readers without the right) are not symbols either.
    pub fn from_kallsyms(text: &str) -> Symbols {
        let mut functions: Vec<Function> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let address = u64::from_str_radix(fields.next()?, 16).ok()?;
                let kind = fields.next()?;
                let name = fields.next()?;
                let module = fields
                    .next()
                    .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'));
                (address != 0 && matches!(kind, "t" | "T" | "w" | "W")).then(|| Function {
                    address,
                    name: name.to_owned(),
                    module: module.map(str::to_owned),
                })
            })
            .collect();
        functions.sort_by_key(|f| f.address);
        Symbols { functions }
    }

    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// The function `address` lies in: the nearest symbol at or below it.
    pub fn resolve(&self, address: u64) -> Option<Location<'_>> {
        let at = self.functions.partition_point(|f| f.address <= address);
        let f = self.functions.get(at.checked_sub(1)?)?;
        let offset = address - f.address;
        (offset < MAX_FUNCTION_SIZE).then_some(Location {
            function: &f.name,
            offset,
            module: f.module.as_deref(),
        })
    }

    /// `function+0xoff [module]`, or the address in hex when no symbol covers it.
    pub fn describe(&self, address: u64) -> String {
        match self.resolve(address) {
            Some(location) => location.to_string(),
            None => format!("{address:#x}"),
        }
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
        let mut functions: Vec<Function> = self
            .functions
            .iter()
            .filter_map(|f| {
                let Some(module) = &f.module else {
                    return Some(f.clone());
                };
                let (old, new) = (from.get(module)?, to.get(module)?);
                Some(Function {
                    address: f.address.wrapping_sub(*old).wrapping_add(*new),
                    ..f.clone()
                })
            })
            .collect();
        functions.sort_by_key(|f| f.address);
        Symbols { functions }
    }

    /// An entry's code location, innermost first: the function of its pc, then of each
    /// return address, joined by ` < `; None without metadata.
    pub fn describe_meta(&self, meta: &crate::Meta) -> Option<String> {
        let places: Vec<String> = meta
            .pc
            .iter()
            .chain(&meta.stack)
            .map(|&a| self.describe(a))
            .collect();
        (!places.is_empty()).then(|| places.join(" < "))
    }

    /// Writes the symbols file whole or not at all.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        for f in &self.functions {
            text.push_str(&format!("{:016x} t {}", f.address, f.name));
            if let Some(module) = &f.module {
                text.push_str(&format!("\t[{module}]"));
            }
            text.push('\n');
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
        Symbols::load(&symbols_path(trace)).ok()
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
    fn a_saved_file_loads_back_the_same_symbols() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.ptrace");
        let s = Symbols::from_kallsyms(KALLSYMS);
        s.save(&symbols_path(&trace)).unwrap();
        assert_eq!(Symbols::of_trace(&trace), Some(s));
        assert_eq!(Symbols::of_trace(&dir.path().join("other")), None);
    }
}
