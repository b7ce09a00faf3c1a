//! Whose code a trace entry is (docs/design/analysis.md, "Whose stores"): the program's, PMDK's
//! libraries', or the kernel's. `persim analyze` ranks its findings by it, and PMDK's rules
//! judge only the program's stores and calls.
//!
//! User code is a library's (an undo log, the allocator's metadata, run-time fields) when
//! the first code address of its call chain outside the C library is in libpmemobj or
//! libpmem: the library's own copies go through libc's `memcpy`, and the program's do too,
//! so libc frames say nothing either way. Other shared objects count as the program's (a
//! program's own libraries are its code). Kernel code is never the program's.

use persim_model::{unknown_name, Named, UnknownName};
use persim_trace::{Meta, Symbols};
use rustc_hash::FxHashMap;
use serde::Serialize;
use strum::{Display, EnumString, VariantNames};

const KERNEL: u64 = 1 << 63;

/// Whose code, in the order findings are shown: the program's first.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Display,
    EnumString,
    VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(
    serialize_all = "kebab-case",
    parse_err_ty = UnknownName,
    parse_err_fn = unknown_name::<Self>
)]
pub enum Owner {
    /// The traced program's (without symbols: any user code).
    Program,
    /// Code of no recorded pc (a hand-written trace): it may be anyone's, so it is always
    /// judged.
    Unknown,
    /// PMDK's libraries (libpmemobj, libpmem).
    Library,
    Kernel,
}

impl Owner {
    pub const ALL: [Owner; 4] = [
        Owner::Program,
        Owner::Unknown,
        Owner::Library,
        Owner::Kernel,
    ];

    /// Whether findings in this code are judged when the user asked for `code`'s: code of
    /// no recorded pc always is.
    pub fn judged(self, code: &[Owner]) -> bool {
        self == Owner::Unknown || code.contains(&self)
    }

    /// `the program's code`, `libraries' code`, … for the text.
    pub fn code(self) -> &'static str {
        match self {
            Owner::Program => "the program's code",
            Owner::Unknown => "code of no recorded pc",
            Owner::Library => "PMDK's libraries' code",
            Owner::Kernel => "the kernel's code",
        }
    }
}

impl Named for Owner {
    const WHAT: &'static str = "owner of code";
}

/// Tells whose code an entry is (see the module's comment).
pub(crate) struct Owners<'a> {
    symbols: Option<&'a Symbols>,
    /// By the frames judged: the same instructions recur.
    known: FxHashMap<(u64, u64), Owner>,
}

impl<'a> Owners<'a> {
    pub fn new(symbols: Option<&'a Symbols>) -> Owners<'a> {
        Owners {
            symbols,
            known: FxHashMap::default(),
        }
    }

    /// Whose the code at `meta.pc` with call chain `meta.stack` is.
    pub fn of(&mut self, meta: &Meta) -> Owner {
        let Some(pc) = meta.pc else {
            return Owner::Unknown;
        };
        if pc >= KERNEL {
            return Owner::Kernel;
        }
        let Some(symbols) = self.symbols else {
            return Owner::Program;
        };
        let key = (pc, meta.stack.first().copied().unwrap_or(0));
        *self.known.entry(key).or_insert_with(|| {
            for &address in std::iter::once(&pc).chain(&meta.stack) {
                let Some(at) = symbols.resolve(address) else {
                    return Owner::Program;
                };
                let object = at.module.unwrap_or(at.function);
                if object.contains("libc.so") {
                    continue;
                }
                return match object.contains("libpmem") {
                    true => Owner::Library,
                    false => Owner::Program,
                };
            }
            Owner::Program
        })
    }

    /// Whether the code is the program's.
    pub fn is_program(&mut self, meta: &Meta) -> bool {
        self.of(meta) == Owner::Program
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Scan::counts` is indexed by `Owner as usize`; `--code` and the JSON use the names.
    #[test]
    fn owners_are_listed_in_order_and_named() {
        for (i, owner) in Owner::ALL.iter().enumerate() {
            assert_eq!(*owner as usize, i);
        }
        assert_eq!(Owner::VARIANTS, ["program", "unknown", "library", "kernel"]);
        assert_eq!("kernel".parse(), Ok(Owner::Kernel));
        assert_eq!(
            serde_json::to_string(&Owner::Library).unwrap(),
            "\"library\""
        );
        assert!("libc".parse::<Owner>().is_err());
    }

    #[test]
    fn libc_frames_are_skipped_and_the_first_other_frame_decides() {
        let symbols = Symbols::from_kallsyms(
            "0000000000401000 T main\t[prog]\n\
             00007f0000000000 T memcpy\t[libc.so.6]\n\
             00007f1000000000 T pmemobj_tx_commit\t[libpmemobj.so.1]\n",
        );
        let mut owners = Owners::new(Some(&symbols));
        let meta = |pc: Option<u64>, stack: &[u64]| Meta {
            pc,
            stack: stack.to_vec(),
            task: None,
        };
        let memcpy = 0x7f00_0000_0010;
        assert_eq!(owners.of(&meta(Some(memcpy), &[0x401010])), Owner::Program);
        let library = meta(Some(memcpy), &[0x7f10_0000_0010, 0x401020]);
        assert_eq!(owners.of(&library), Owner::Library);
        assert_eq!(
            owners.of(&meta(Some(0xffff_ffff_8100_0000), &[])),
            Owner::Kernel
        );
        assert_eq!(owners.of(&meta(None, &[])), Owner::Unknown);
        assert_eq!(
            Owners::new(None).of(&library),
            Owner::Program,
            "without symbols user code is the program's"
        );
    }
}
