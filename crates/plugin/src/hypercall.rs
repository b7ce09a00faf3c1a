//! The hypercall a `cpuid` makes (encoding: `persim_abi::hypercall`), as the trace's entry.

use persim_abi::hypercall::Operation;
use persim_trace::Hypercall;

/// The hypercall a `cpuid` makes, from its registers; None for an ordinary cpuid.
pub fn decode(rax: u64, rdx: u64, rcx: u64) -> Option<Hypercall> {
    Some(match Operation::decode(rax, rdx, rcx)? {
        Operation::Start => Hypercall::Start,
        Operation::Checkpoint(n) => Hypercall::Checkpoint(n),
        Operation::Success => Hypercall::Success,
        Operation::Fail => Hypercall::Fail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_abi::hypercall::MAGIC;

    #[test]
    fn decodes_the_guest_encoding() {
        let call = |op: Operation| {
            let (code, arg) = op.encode();
            decode(u64::from(MAGIC), u64::from(code), arg)
        };
        assert_eq!(call(Operation::Start), Some(Hypercall::Start));
        assert_eq!(
            call(Operation::Checkpoint(42)),
            Some(Hypercall::Checkpoint(42))
        );
        assert_eq!(call(Operation::Success), Some(Hypercall::Success));
        assert_eq!(call(Operation::Fail), Some(Hypercall::Fail));
        assert_eq!(decode(0, 1, 0), None);
    }
}
