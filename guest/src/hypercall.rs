//! The guest side of Persim's hypercall: executes the `cpuid` whose encoding
//! `persim_abi::hypercall` defines (the TCG plugin decodes it with the same constants).

pub use persim_abi::hypercall::{Operation, MAGIC};

use std::io::BufRead;

/// Per-CPU symbols that hold the kernel's pointer to the running task, in the order they
/// are looked for: `current_task` (6.1, and again from 6.15), `pcpu_hot` (6.2 to 6.14,
/// whose first field is `current_task`).
const CURRENT_TASK_SYMBOLS: [&str; 2] = ["current_task", "pcpu_hot"];

/// `start` with what the plugin needs to record threads: this process's id and the
/// per-CPU offset of the running task's pointer from /proc/kallsyms (0 when the kernel
/// does not list it; the trace then records no threads).
pub fn start() -> Operation {
    let current_task = std::fs::File::open("/proc/kallsyms")
        .map(|f| current_task_offset(std::io::BufReader::new(f)))
        .unwrap_or(0);
    Operation::Start {
        pid: std::process::id(),
        current_task,
    }
}

/// The address of the first of [`CURRENT_TASK_SYMBOLS`] that kallsyms lists, or 0.
/// kallsyms is in address order and the zero-based per-CPU symbols come first, so the
/// search stops at the first kernel-half address once one was found: reading all of it
/// takes seconds under TCG.
fn current_task_offset(kallsyms: impl BufRead) -> u64 {
    let mut found = [0; CURRENT_TASK_SYMBOLS.len()];
    for line in kallsyms.lines().map_while(Result::ok) {
        let mut words = line.split_whitespace();
        let (Some(address), Some(_kind), Some(name)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let address = u64::from_str_radix(address, 16).unwrap_or(0);
        if let Some(i) = CURRENT_TASK_SYMBOLS.iter().position(|s| *s == name) {
            found[i] = address;
        }
        if found[0] != 0 || (address >> 63 == 1 && found.iter().any(|&a| a != 0)) {
            break;
        }
    }
    found.into_iter().find(|&a| a != 0).unwrap_or(0)
}

/// Executes the hypercall.
pub fn call(op: Operation) {
    let (code, arg, arg2) = op.encode();
    #[cfg(target_arch = "x86_64")]
    // SAFETY: cpuid only writes eax, ebx, ecx and edx; rbx is reserved by the compiler, so
    // it is saved and restored around the instruction.
    unsafe {
        std::arch::asm!(
            "mov {saved}, rbx",
            "cpuid",
            "mov rbx, {saved}",
            saved = out(reg) _,
            inout("eax") MAGIC => _,
            inout("rcx") arg => _,
            inout("edx") code => _,
            in("rsi") arg2,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (code, arg, arg2);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_running_tasks_pointer_in_kallsyms() {
        let v6_1 = "0000000000000000 A fixed_percpu_data\n0000000000020a40 A current_task\n";
        assert_eq!(current_task_offset(v6_1.as_bytes()), 0x2_0a40);
        let v6_12 = "000000000002c0c0 A pcpu_hot\nffffffff81000000 T _text\n\
                     ffffffff82000000 D current_task\n";
        assert_eq!(current_task_offset(v6_12.as_bytes()), 0x2_c0c0);
        // Without root, kallsyms shows zeros: no threads rather than wrong ones.
        let hidden = "0000000000000000 A current_task\n";
        assert_eq!(current_task_offset(hidden.as_bytes()), 0);
    }

    #[test]
    fn the_call_is_harmless_without_the_tracer() {
        call(Operation::Checkpoint(1));
    }
}
