//! The plugin side of the hypercall (guest side: guest/src/hypercall.rs): a `cpuid` with
//! leaf [`MAGIC`] in eax, the operation in edx and its argument in rcx.

use persim_trace::Hypercall;

pub const MAGIC: u32 = 0x5045_5253;

/// The hypercall a `cpuid` makes, from its registers; None for an ordinary cpuid.
pub fn decode(rax: u64, rdx: u64, rcx: u64) -> Option<Hypercall> {
    if rax as u32 != MAGIC {
        return None;
    }
    match rdx as u32 {
        1 => Some(Hypercall::Start),
        2 => Some(Hypercall::Checkpoint(rcx)),
        3 => Some(Hypercall::Success),
        4 => Some(Hypercall::Fail),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_guest_encoding() {
        assert_eq!(decode(0x5045_5253, 1, 0), Some(Hypercall::Start));
        assert_eq!(
            decode(0xffff_ffff_5045_5253, 2, 42),
            Some(Hypercall::Checkpoint(42))
        );
        assert_eq!(decode(0x5045_5253, 3, 0), Some(Hypercall::Success));
        assert_eq!(decode(0x5045_5253, 4, 0), Some(Hypercall::Fail));
        assert_eq!(decode(0, 1, 0), None);
        assert_eq!(decode(0x5045_5253, 9, 0), None);
    }
}
