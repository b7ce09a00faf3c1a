//! Symbol collection: the function symbols of a recording's guest (the kernel's, its
//! modules' and the traced run's user programs'), saved beside the trace for printing
//! stacks and culprits.

use crate::boot::Prepared;
use crate::console::Vm;
use crate::error::VmError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where `user-maps record` keeps, in the guest, the code mappings of the traced run's
/// programs.
pub(crate) const USER_MAPS: &str = "/tmp/persim-user-maps";

/// Saves the symbols of one guest's recordings, one after another.
#[derive(Default)]
pub(crate) struct SymbolSaver {
    /// The loaded modules and user code mappings, and the symbols file saved for them last.
    last: Option<(CodeLayout, PathBuf)>,
}

impl SymbolSaver {
    /// Saves the symbols of `vm` (booted from `prepared`) beside `output`'s trace: a hard
    /// link to the previous recording's when the same modules and user code were at the
    /// same addresses (a campaign's tests on one guest), else [`save_symbols`].
    pub(crate) fn save(
        &mut self,
        vm: &mut Vm,
        prepared: &Prepared,
        cache_dir: &Path,
        output: &Path,
        timeout: Duration,
    ) -> Result<(), VmError> {
        let layout = CodeLayout {
            modules: module_addresses(&vm.run("cat /proc/modules", timeout)?.output),
            // Empty (or cat's complaint) when the command ran no user code.
            user_mappings: vm.run(&format!("cat {USER_MAPS}"), timeout)?.output,
        };
        let target = persim_trace::Recording::new(output).symbols();
        let _ = std::fs::remove_file(&target);
        if let Some((previous_layout, previous)) = &self.last {
            if *previous_layout == layout && std::fs::hard_link(previous, &target).is_ok() {
                return Ok(());
            }
        }
        let user = user_symbols(vm, prepared, cache_dir, &layout.user_mappings, timeout)?;
        save_symbols(
            vm,
            prepared,
            cache_dir,
            &layout.modules,
            user,
            &target,
            timeout,
        )?;
        self.last = Some((layout, target));
        Ok(())
    }
}

/// Where code was in the guest when a run ended: what its symbols depend on.
#[derive(PartialEq, Eq)]
struct CodeLayout {
    /// Module name -> load address (`/proc/modules`).
    modules: HashMap<String, u64>,
    /// What `user-maps record` kept of the traced run's programs.
    user_mappings: String,
}

/// Saves the guest's function symbols, the kernel's and the run's `user` programs',
/// beside the trace (`persim_trace::Recording`).
/// Under `nokaslr` the kernel's own addresses are fixed, and a module's functions keep
/// their offsets from its load address, which `/proc/modules` gives. So `/proc/kallsyms`
/// (about 4 MB over the serial console, 10 s) is fetched once per kernel and set of
/// modules and cached with the load addresses it was taken at; a later trace reads only
/// `/proc/modules` and moves the modules' functions to where this boot loaded them.
fn save_symbols(
    vm: &mut Vm,
    prepared: &Prepared,
    cache_dir: &Path,
    loaded: &HashMap<String, u64>,
    user: persim_trace::Symbols,
    target: &Path,
    timeout: Duration,
) -> Result<(), VmError> {
    let mut names: Vec<&String> = loaded.keys().collect();
    names.sort();
    let mut key = blake3::Hasher::new();
    key.update(prepared.kernel.image.as_os_str().as_encoded_bytes());
    for name in names {
        key.update(name.as_bytes()).update(b"\n");
    }
    let stem = format!("kallsyms-{}", &key.finalize().to_hex()[..16]);
    let (cached, cached_modules) = (
        cache_dir.join(format!("{stem}.zst")),
        cache_dir.join(format!("{stem}.modules")),
    );
    let write_error = |path: &Path, e| VmError::io(format!("cannot write {}", path.display()), e);
    let mut fetched = match (
        persim_trace::Symbols::load(&cached),
        std::fs::read_to_string(&cached_modules),
    ) {
        (Ok(symbols), Ok(modules)) => {
            symbols.with_modules_moved(&module_addresses(&modules), loaded)
        }
        _ => {
            let kallsyms = vm.run("cat /proc/kallsyms", timeout)?;
            let symbols = persim_trace::Symbols::from_kallsyms(&kallsyms.output);
            if symbols.is_empty() {
                return Err(VmError::io(
                    "/proc/kallsyms in the guest",
                    std::io::Error::other("no function symbols"),
                ));
            }
            let modules: String = loaded
                .iter()
                .map(|(m, a)| format!("{m} 0 0 - Live {a:#x}\n"))
                .collect();
            symbols.save(&cached).map_err(|e| write_error(&cached, e))?;
            persim_trace::atomic_file::write_atomically(&cached_modules, modules.as_bytes())
                .map_err(|e| write_error(&cached_modules, e))?;
            symbols
        }
    };
    fetched.extend(user);
    fetched.save(target).map_err(|e| write_error(target, e))
}

/// The functions of the traced run's user programs where `mappings` (what `user-maps
/// record` kept) had them. The guest's programs are the initramfs's, so they are read once
/// per initramfs and set of mappings into the cache directory (a hello-world run's
/// `hypercall` alone is about 200 KB over the console), unless a program ran from the file
/// system under test, whose files a test may change.
fn user_symbols(
    vm: &mut Vm,
    prepared: &Prepared,
    cache_dir: &Path,
    mappings: &str,
    timeout: Duration,
) -> Result<persim_trace::Symbols, VmError> {
    if mappings.trim().is_empty() {
        return Ok(persim_trace::Symbols::default());
    }
    let mut key = blake3::Hasher::new();
    key.update(prepared.initramfs.as_os_str().as_encoded_bytes())
        .update(b"\n")
        .update(mappings.as_bytes());
    let cached = cache_dir.join(format!(
        "user-symbols-{}.zst",
        &key.finalize().to_hex()[..16]
    ));
    if let Ok(symbols) = persim_trace::Symbols::load(&cached) {
        return Ok(symbols);
    }
    let text = vm
        .run(&format!("user-maps symbols {USER_MAPS}"), timeout)?
        .output;
    let mut symbols = persim_trace::Symbols::from_kallsyms(&text);
    symbols.move_files(|guest| prepared.host_files.get(guest).cloned());
    if !mappings.contains(" /mnt/") {
        symbols
            .save(&cached)
            .map_err(|e| VmError::io(format!("cannot write {}", cached.display()), e))?;
    }
    Ok(symbols)
}

/// Module name -> load address from `/proc/modules` lines (`name size refs deps state
/// address`); other lines (kernel messages share the console) are skipped.
fn module_addresses(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let address = fields.get(5)?.strip_prefix("0x")?;
            Some((fields[0].to_owned(), u64::from_str_radix(address, 16).ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_addresses_come_from_proc_modules_lines_only() {
        let text = "ext4 983040 1 - Live 0xffffffffc0297000\n\
            [   3.1] EXT4-fs (pmem0): mounted filesystem with ordered data mode 1 2\n\
            jbd2 167936 1 ext4, Live 0xffffffffc026d000 (E)\n";
        let modules = module_addresses(text);
        assert_eq!(modules.len(), 2, "{modules:?}");
        assert_eq!(modules["ext4"], 0xffffffffc0297000);
        assert_eq!(modules["jbd2"], 0xffffffffc026d000);
    }
}
