//! Persim's hypercall: a `cpuid` whose leaf (eax) is [`MAGIC`], with the operation code in
//! edx, its argument in rcx, a second one in rsi and a third in rdi. The guest's `hypercall` tool and
//! programs through `include/persim.h` execute it, the TCG plugin decodes it
//! (docs/design/tracer.md, "Hypercall").

/// "PERS" as a cpuid leaf: outside every range a CPU or hypervisor defines.
pub const MAGIC: u32 = 0x5045_5253;

const START: u32 = 1;
const CHECKPOINT: u32 = 2;
const SUCCESS: u32 = 3;
const FAIL: u32 = 4;
/// Also in include/persim.h, for C programs.
const VOLATILE: u32 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// The caller's process id and the per-CPU offset of the kernel's pointer to the
    /// running task (`current_task`, or `pcpu_hot` whose first field it is, in
    /// /proc/kallsyms): the plugin finds the task fields it records with each thread
    /// switch from them (docs/design/tracer.md, "Processes and threads"). 0: unknown, no threads
    /// recorded. `preempt_count`: the per-CPU offset of the kernel's preemption count
    /// (`__preempt_count`, or 8 past `pcpu_hot`), whose interrupt bits tell the fences of
    /// interrupt handlers apart (docs/design/tracer.md, "Interrupts"); 0: unknown.
    Start {
        pid: u32,
        current_task: u64,
        preempt_count: u64,
    },
    Checkpoint(u64),
    Success,
    Fail,
    /// `len` bytes at virtual address `addr` of the calling program hold run-time data,
    /// not persistent state (the plugin translates the range to PM).
    Volatile {
        addr: u64,
        len: u64,
    },
}

impl Operation {
    /// The operation from the words of `hypercall`'s command line: `start`,
    /// `checkpoint N`, `success` or `fail` (the host's scripts write them).
    pub fn parse(args: &[String]) -> Result<Operation, String> {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match args.as_slice() {
            ["start"] => Ok(Operation::Start {
                pid: 0,
                current_task: 0,
                preempt_count: 0,
            }),
            ["success"] => Ok(Operation::Success),
            ["fail"] => Ok(Operation::Fail),
            ["checkpoint", n] => n
                .parse()
                .map(Operation::Checkpoint)
                .map_err(|_| format!("checkpoint number `{n}` is not a non-negative integer")),
            ["volatile", ..] => Err("`volatile` takes addresses of the calling program: \
                 call persim_volatile() from include/persim.h in the program itself"
                .into()),
            _ => Err(format!("unknown arguments `{}`", args.join(" "))),
        }
    }

    /// (operation code in edx, argument in rcx, second argument in rsi, third in rdi)
    pub fn encode(self) -> (u32, u64, u64, u64) {
        match self {
            Operation::Start {
                pid,
                current_task,
                preempt_count,
            } => (START, pid.into(), current_task, preempt_count),
            Operation::Checkpoint(n) => (CHECKPOINT, n, 0, 0),
            Operation::Success => (SUCCESS, 0, 0, 0),
            Operation::Fail => (FAIL, 0, 0, 0),
            Operation::Volatile { addr, len } => (VOLATILE, addr, len, 0),
        }
    }

    /// The hypercall a `cpuid` makes, from its registers; None for an ordinary cpuid.
    /// Only the low 32 bits of rax and rdx count, as `cpuid` reads only eax and edx.
    pub fn decode(rax: u64, rdx: u64, rcx: u64, rsi: u64, rdi: u64) -> Option<Operation> {
        if rax as u32 != MAGIC {
            return None;
        }
        match rdx as u32 {
            START => Some(Operation::Start {
                pid: rcx as u32,
                current_task: rsi,
                preempt_count: rdi,
            }),
            CHECKPOINT => Some(Operation::Checkpoint(rcx)),
            SUCCESS => Some(Operation::Success),
            FAIL => Some(Operation::Fail),
            VOLATILE => Some(Operation::Volatile {
                addr: rcx,
                len: rsi,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    const ALL: [Operation; 5] = [
        Operation::Start {
            pid: 42,
            current_task: 0x2_0a40,
            preempt_count: 0x2_0a48,
        },
        Operation::Checkpoint(9),
        Operation::Success,
        Operation::Fail,
        Operation::Volatile {
            addr: 0x7f00_1000,
            len: 64,
        },
    ];

    #[test]
    fn parses_every_operation() {
        assert_eq!(
            Operation::parse(&args("start")),
            Ok(Operation::Start {
                pid: 0,
                current_task: 0,
                preempt_count: 0
            })
        );
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
        assert!(Operation::parse(&args("volatile 0x1000 64"))
            .unwrap_err()
            .contains("persim.h"));
    }

    #[test]
    fn codes_are_distinct_and_carry_the_checkpoint() {
        let codes: Vec<_> = ALL.map(Operation::encode).into();
        assert_eq!(
            codes,
            [
                (1, 42, 0x2_0a40, 0x2_0a48),
                (2, 9, 0, 0),
                (3, 0, 0, 0),
                (4, 0, 0, 0),
                (5, 0x7f00_1000, 64, 0)
            ]
        );
    }

    #[test]
    fn decoding_inverts_encoding() {
        for op in ALL {
            let (code, arg, arg2, arg3) = op.encode();
            assert_eq!(
                Operation::decode(u64::from(MAGIC), u64::from(code), arg, arg2, arg3),
                Some(op)
            );
        }
        // Upper halves of rax/rdx are not part of the call.
        assert_eq!(
            Operation::decode(0xffff_ffff_5045_5253, 0xdead_0000_0002, 42, 0, 0),
            Some(Operation::Checkpoint(42))
        );
        assert_eq!(Operation::decode(0, 1, 0, 0, 0), None);
        assert_eq!(Operation::decode(u64::from(MAGIC), 9, 0, 0, 0), None);
    }
}
