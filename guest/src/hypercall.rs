//! The guest side of Persim's hypercall: executes the `cpuid` whose encoding
//! `persim_abi::hypercall` defines (the TCG plugin decodes it with the same constants).

pub use persim_abi::hypercall::{Operation, MAGIC};

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
    fn the_call_is_harmless_without_the_tracer() {
        call(Operation::Checkpoint(1));
    }
}
