//! The guest side of Persim's hypercall: executes the `cpuid` whose encoding
//! `persim_abi::hypercall` defines (the TCG plugin decodes it with the same constants).

pub use persim_abi::hypercall::{Operation, MAGIC};

use std::io::BufRead;

/// `start` with what the plugin needs to record threads and tell interrupts apart: this
/// process's id and the per-CPU offsets of the running task's pointer and of the
/// preemption count from /proc/kallsyms (0 when the kernel does not list them).
pub fn start() -> Operation {
    let offsets = std::fs::File::open("/proc/kallsyms")
        .map(|f| per_cpu_offsets(std::io::BufReader::new(f)))
        .unwrap_or_default();
    Operation::Start {
        pid: std::process::id(),
        current_task: offsets.current_task,
        preempt_count: offsets.preempt_count,
    }
}

/// Per-CPU offsets of the kernel's data the plugin reads.
#[derive(Debug, Default, PartialEq, Eq)]
struct PerCpuOffsets {
    current_task: u64,
    preempt_count: u64,
}

/// The per-CPU (zero-based) symbols of kallsyms: the pointer to the running task is
/// `current_task` (6.1, and again from 6.15) or the first field of `pcpu_hot` (6.2 to
/// 6.14); the preemption count is `__preempt_count`, or `pcpu_hot`'s field after the task
/// pointer. kallsyms is in address order and the per-CPU symbols come first, so the
/// search stops at the first kernel-half address once one was found: reading all of it
/// takes seconds under TCG.
fn per_cpu_offsets(kallsyms: impl BufRead) -> PerCpuOffsets {
    let (mut current_task, mut preempt_count, mut pcpu_hot) = (0, 0, 0);
    for line in kallsyms.lines().map_while(Result::ok) {
        let mut words = line.split_whitespace();
        let (Some(address), Some(_kind), Some(name)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let address = u64::from_str_radix(address, 16).unwrap_or(0);
        if address >> 63 == 1 {
            if current_task != 0 || pcpu_hot != 0 {
                break;
            }
            continue;
        }
        match name {
            "current_task" => current_task = address,
            "__preempt_count" => preempt_count = address,
            "pcpu_hot" => pcpu_hot = address,
            _ => {}
        }
    }
    let in_pcpu_hot = |offset: u64| if pcpu_hot == 0 { 0 } else { pcpu_hot + offset };
    PerCpuOffsets {
        current_task: if current_task != 0 {
            current_task
        } else {
            in_pcpu_hot(0)
        },
        preempt_count: if preempt_count != 0 {
            preempt_count
        } else {
            in_pcpu_hot(8)
        },
    }
}

/// Executes the hypercall.
pub fn call(op: Operation) {
    let (code, arg, arg2, arg3) = op.encode();
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
            in("rdi") arg3,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (code, arg, arg2, arg3);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_running_tasks_pointer_and_the_preemption_count_in_kallsyms() {
        let offsets = |text: &str| per_cpu_offsets(text.as_bytes());
        let v6_1 = "0000000000000000 A fixed_percpu_data\n000000000001f3cc A __preempt_count\n\
                    0000000000020a40 A current_task\nffffffff81000000 T _text\n";
        assert_eq!(
            offsets(v6_1),
            PerCpuOffsets {
                current_task: 0x2_0a40,
                preempt_count: 0x1_f3cc
            }
        );
        let v6_12 = "000000000002c0c0 A pcpu_hot\nffffffff81000000 T _text\n\
                     ffffffff82000000 D current_task\n";
        assert_eq!(
            offsets(v6_12),
            PerCpuOffsets {
                current_task: 0x2_c0c0,
                preempt_count: 0x2_c0c8
            }
        );
        // Without root, kallsyms shows zeros: no threads rather than wrong ones.
        let hidden = "0000000000000000 A current_task\n0000000000000000 A __preempt_count\n";
        assert_eq!(offsets(hidden), PerCpuOffsets::default());
    }

    #[test]
    fn the_call_is_harmless_without_the_tracer() {
        call(Operation::Checkpoint(1));
    }
}
