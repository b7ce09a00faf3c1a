//! The guest side of Persim's hypercall: a `cpuid` whose leaf (eax) is [`MAGIC`], with the
//! operation code in edx and its argument in rcx. The TCG plugin decodes the same
//! constants (crates/plugin/src/hypercall.rs).

/// "PERS" as a cpuid leaf: outside every range a CPU or hypervisor defines.
pub const MAGIC: u32 = 0x5045_5253;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Start,
    Checkpoint(u64),
    Success,
    Fail,
}

impl Operation {
    pub fn parse(args: &[String]) -> Result<Operation, String> {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match args.as_slice() {
            ["start"] => Ok(Operation::Start),
            ["success"] => Ok(Operation::Success),
            ["fail"] => Ok(Operation::Fail),
            ["checkpoint", n] => n
                .parse()
                .map(Operation::Checkpoint)
                .map_err(|_| format!("checkpoint number `{n}` is not a non-negative integer")),
            _ => Err(format!("unknown arguments `{}`", args.join(" "))),
        }
    }

    /// (operation code in edx, argument in rcx)
    pub fn encode(self) -> (u32, u64) {
        match self {
            Operation::Start => (1, 0),
            Operation::Checkpoint(n) => (2, n),
            Operation::Success => (3, 0),
            Operation::Fail => (4, 0),
        }
    }
}

/// Executes the hypercall.
pub fn call(op: Operation) {
    let (code, arg) = op.encode();
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
            options(nostack, preserves_flags),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (code, arg);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_every_operation() {
        assert_eq!(Operation::parse(&args("start")), Ok(Operation::Start));
        assert_eq!(
            Operation::parse(&args("checkpoint 7")),
            Ok(Operation::Checkpoint(7))
        );
        assert_eq!(Operation::parse(&args("success")), Ok(Operation::Success));
        assert_eq!(Operation::parse(&args("fail")), Ok(Operation::Fail));
        assert!(Operation::parse(&args("checkpoint x"))
            .unwrap_err()
            .contains("`x`"));
        assert!(Operation::parse(&args("stop")).is_err());
    }

    #[test]
    fn codes_are_distinct_and_carry_the_checkpoint() {
        let codes: Vec<_> = [
            Operation::Start,
            Operation::Checkpoint(9),
            Operation::Success,
            Operation::Fail,
        ]
        .map(Operation::encode)
        .into();
        assert_eq!(codes, [(1, 0), (2, 9), (3, 0), (4, 0)]);
    }

    #[test]
    fn the_call_is_harmless_without_the_tracer() {
        call(Operation::Checkpoint(1));
    }
}
