//! Frame-pointer stack walks for `--stack-traces`.

/// Return addresses recorded per entry at most: enough to see through a library into its
/// caller, cheap enough to walk on every PM access.
pub const MAX_DEPTH: usize = 16;

/// The return addresses of the frame chain starting at `rbp`, innermost first. Each frame
/// holds the caller's rbp at `[rbp]` and the return address at `[rbp + 8]`;
/// `read_frame(rbp)` reads both. Code built without frame pointers leaves any value in
/// rbp, so the walk stops at the first frame that cannot be read, is misaligned, returns
/// to address 0, or whose caller's frame is not higher up the same stack half (user or
/// kernel).
pub fn walk(rbp: u64, mut read_frame: impl FnMut(u64) -> Option<(u64, u64)>) -> Vec<u64> {
    let mut stack = Vec::new();
    let mut frame = rbp;
    while stack.len() < MAX_DEPTH && frame != 0 && frame.is_multiple_of(8) {
        let Some((caller_frame, ret)) = read_frame(frame) else {
            break;
        };
        if ret == 0 {
            break;
        }
        stack.push(ret);
        let same_half = (caller_frame ^ frame) >> 63 == 0;
        if caller_frame <= frame || !same_half {
            break;
        }
        frame = caller_frame;
    }
    stack
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Guest memory holding frames: address -> (saved rbp, return address).
    fn memory(frames: &[(u64, u64, u64)]) -> impl FnMut(u64) -> Option<(u64, u64)> {
        let frames: HashMap<u64, (u64, u64)> = frames
            .iter()
            .map(|&(at, rbp, ret)| (at, (rbp, ret)))
            .collect();
        move |at| frames.get(&at).copied()
    }

    #[test]
    fn follows_the_chain_up_to_the_outermost_frame() {
        let mem = memory(&[
            (0x7ff0_0000, 0x7ff0_0040, 0x401010),
            (0x7ff0_0040, 0x7ff0_0100, 0x402020),
            (0x7ff0_0100, 0, 0x403030),
        ]);
        assert_eq!(walk(0x7ff0_0000, mem), [0x401010, 0x402020, 0x403030]);
    }

    #[test]
    fn stops_at_garbage() {
        // Unreadable, misaligned or null frames give nothing.
        assert!(walk(0x1234_5678, memory(&[])).is_empty());
        assert!(walk(0x7ff0_0004, memory(&[(0x7ff0_0004, 0, 1)])).is_empty());
        assert!(walk(0, memory(&[(0, 0x10, 1)])).is_empty());
        // A caller frame below the current one, or in the other half, ends the walk after
        // the current frame's return address.
        let down = memory(&[(0x7ff0_0100, 0x7ff0_0000, 0x401010), (0x7ff0_0000, 0, 7)]);
        assert_eq!(walk(0x7ff0_0100, down), [0x401010]);
        let kernel = 0xffff_c900_0000_0000;
        let across = memory(&[(0x7ff0_0100, kernel, 0x401010), (kernel, 0, 7)]);
        assert_eq!(walk(0x7ff0_0100, across), [0x401010]);
        // A null return address is not a frame.
        assert!(walk(0x7ff0_0000, memory(&[(0x7ff0_0000, 0x7ff0_0040, 0)])).is_empty());
    }

    #[test]
    fn is_depth_limited() {
        let frames: Vec<(u64, u64, u64)> = (0..40u64)
            .map(|i| (0x1000 + i * 16, 0x1000 + (i + 1) * 16, 0x400000 + i))
            .collect();
        let stack = walk(0x1000, memory(&frames));
        assert_eq!(stack.len(), MAX_DEPTH);
        assert_eq!(stack[..3], [0x400000, 0x400001, 0x400002]);
    }
}
