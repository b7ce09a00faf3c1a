//! The hypercall a `cpuid` makes (encoding: `persim_abi::hypercall`), as the plugin acts
//! on it.

use persim_abi::hypercall::Operation;
use persim_trace::Hypercall;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `start`, from process `pid`; `current_task` and `preempt_count` as in
    /// [`Operation::Start`].
    Start {
        pid: u32,
        current_task: u64,
        preempt_count: u64,
    },
    /// A mark of the test, recorded as it is.
    Mark(Hypercall),
    /// Run-time data at a virtual range of the calling program, to translate to PM.
    Volatile { vaddr: u64, len: u64 },
}

/// The hypercall a `cpuid` makes, from its registers; None for an ordinary cpuid.
pub fn decode(rax: u64, rdx: u64, rcx: u64, rsi: u64, rdi: u64) -> Option<Call> {
    Some(match Operation::decode(rax, rdx, rcx, rsi, rdi)? {
        Operation::Start {
            pid,
            current_task,
            preempt_count,
        } => Call::Start {
            pid,
            current_task,
            preempt_count,
        },
        Operation::Checkpoint(n) => Call::Mark(Hypercall::Checkpoint(n)),
        Operation::Success => Call::Mark(Hypercall::Success),
        Operation::Fail => Call::Mark(Hypercall::Fail),
        Operation::Volatile { addr, len } => Call::Volatile { vaddr: addr, len },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_abi::hypercall::MAGIC;

    #[test]
    fn decodes_the_guest_encoding() {
        let call = |op: Operation| {
            let (code, arg, arg2, arg3) = op.encode();
            decode(u64::from(MAGIC), u64::from(code), arg, arg2, arg3)
        };
        assert_eq!(
            call(Operation::Start {
                pid: 7,
                current_task: 0x2_0a40,
                preempt_count: 0x8
            }),
            Some(Call::Start {
                pid: 7,
                current_task: 0x2_0a40,
                preempt_count: 0x8
            })
        );
        assert_eq!(
            call(Operation::Checkpoint(42)),
            Some(Call::Mark(Hypercall::Checkpoint(42)))
        );
        assert_eq!(
            call(Operation::Success),
            Some(Call::Mark(Hypercall::Success))
        );
        assert_eq!(call(Operation::Fail), Some(Call::Mark(Hypercall::Fail)));
        assert_eq!(
            call(Operation::Volatile {
                addr: 0x7f12_3000,
                len: 200
            }),
            Some(Call::Volatile {
                vaddr: 0x7f12_3000,
                len: 200
            })
        );
        assert_eq!(decode(0, 1, 0, 0, 0), None);
    }
}
