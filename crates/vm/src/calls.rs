//! The table of functions whose calls a recording traces (`--trace-calls`,
//! `persim_abi::calls`): each name found in the ELF symbol tables of the guest's programs
//! and their shared libraries, with its offset in its page and its first bytes.

use crate::error::VmError;
use persim_abi::calls::{ArgRole, ReturnRole, TracedFunction, CODE_BYTES, PMDK, PMDK_SET};
use std::path::{Path, PathBuf};

/// Argument registers recorded for a function named by the user (its arity is unknown).
const ALL_ARGS: u8 = 6;

/// The functions `names` asks for (`pmdk` for the built-in set) in `files`. A name of the
/// built-in set that no file has is left out; any other is an error.
pub(crate) fn resolve(names: &[String], files: &[PathBuf]) -> Result<Vec<TracedFunction>, VmError> {
    let mut wanted: Vec<(&str, u8, ArgRole, ReturnRole, bool)> = Vec::new();
    for name in names {
        if name == PMDK_SET {
            wanted.extend(
                PMDK.iter()
                    .map(|&(n, args, role, returns)| (n, args, role, returns, false)),
            );
        } else {
            // its return type is unknown too: rax, which is what a C function returns
            wanted.push((name, ALL_ARGS, ArgRole::Plain, ReturnRole::Value, true));
        }
    }
    let elves: Vec<(PathBuf, Vec<u8>)> = files
        .iter()
        .filter_map(|f| std::fs::read(f).ok().map(|data| (f.clone(), data)))
        .collect();
    let mut table = Vec::new();
    for (name, args, role, returns, required) in wanted {
        if table.iter().any(|f: &TracedFunction| f.name == name) {
            continue;
        }
        let found: Vec<(u64, Vec<u8>)> = elves
            .iter()
            .filter_map(|(_, data)| function_code(data, name))
            .collect();
        if found.is_empty() && required {
            return Err(VmError::UnknownFunction {
                name: name.to_owned(),
                searched: files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        for (address, code) in found {
            table.push(TracedFunction {
                name: name.to_owned(),
                page_offset: (address % 4096) as u16,
                args,
                role,
                returns,
                code,
            });
        }
    }
    Ok(table)
}

/// The address and first bytes of the function `name` defined in the ELF file `data`: in
/// its symbol table or, in a stripped library, its dynamic one.
fn function_code(data: &[u8], name: &str) -> Option<(u64, Vec<u8>)> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
    let file = object::File::parse(data).ok()?;
    let symbol = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.name() == Ok(name))?;
    let len = match symbol.size() {
        0 => CODE_BYTES as u64,
        size => size.min(CODE_BYTES as u64),
    };
    let section = file.section_by_index(symbol.section_index()?).ok()?;
    let code = section.data_range(symbol.address(), len).ok()??;
    Some((symbol.address(), code.to_vec()))
}

/// Writes the table for the plugin next to `at`; None when no call is traced.
pub(crate) fn write_table(
    names: &[String],
    tools: &[String],
    at: &Path,
) -> Result<Option<PathBuf>, VmError> {
    if names.is_empty() {
        return Ok(None);
    }
    let table = resolve(names, &crate::initramfs::tool_files(tools)?)?;
    persim_trace::atomic_file::write_atomically(
        at,
        persim_abi::calls::write_table(&table).as_bytes(),
    )
    .map_err(|e| VmError::io(format!("writing {}", at.display()), e))?;
    Ok(Some(at.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own executable: an ELF file with a symbol table.
    fn own_executable() -> PathBuf {
        std::env::current_exe().unwrap()
    }

    #[test]
    fn a_named_function_is_found_with_its_code_and_an_unknown_one_is_an_error() {
        let libc = PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6");
        let files = [own_executable(), libc.clone()];
        let names = ["memcpy".to_owned(), PMDK_SET.to_owned()];
        let table = resolve(&names, &files).unwrap();
        let memcpy: Vec<_> = table.iter().filter(|f| f.name == "memcpy").collect();
        assert!(!memcpy.is_empty(), "{table:?}");
        let data = std::fs::read(&libc).unwrap();
        let (address, code) = function_code(&data, "memcpy").unwrap();
        assert!(memcpy
            .iter()
            .any(|f| u64::from(f.page_offset) == address % 4096 && f.code == code));
        assert_eq!(memcpy[0].args, ALL_ARGS);
        // the built-in set's functions are not in libc, and that is no error
        assert!(table.iter().all(|f| !f.name.starts_with("pmem")));
        let missing = resolve(&["no_such_function_anywhere".to_owned()], &files).unwrap_err();
        let message = missing.to_string();
        assert!(
            message.contains("no_such_function_anywhere") && message.contains("libc.so.6"),
            "{message}"
        );
    }
}
