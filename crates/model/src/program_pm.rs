//! The PM a traced program works on (docs/design/model.md, "Program scope"): the 4 KiB
//! pages it has read or written from user space so far. Under the `program` scope,
//! `reads` and `global-prefix` explore only dirty lines in those pages once there are any;
//! the kernel's own lines elsewhere (the file system's journal and metadata under a
//! program's pool file) follow the cut, as at the program's program-order points.

use crate::pending::LineState;
use persim_trace::{Entry, Op};
use rustc_hash::FxHashSet;

const PAGE_SHIFT: u32 = 12;

/// x86-64 user space ends below the canonical hole; kernel text is above it.
const USER_END: u64 = 1 << 47;

#[derive(Debug, Default)]
pub struct ProgramPm {
    pages: FxHashSet<u64>,
}

impl ProgramPm {
    /// Notes the page `entry` accesses if user-space code made the access.
    pub fn note(&mut self, entry: &Entry) {
        let addr = match &entry.op {
            Op::Write { addr, .. } | Op::Read { addr, .. } => *addr,
            _ => return,
        };
        if entry.meta.pc.is_some_and(|pc| pc < USER_END) {
            self.pages.insert(addr >> PAGE_SHIFT);
        }
    }

    /// Whether the program has touched PM yet (before that, every line is explored).
    pub fn is_known(&self) -> bool {
        !self.pages.is_empty()
    }

    pub fn holds(&self, line: &LineState) -> bool {
        self.pages.contains(&(line.line >> PAGE_SHIFT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use persim_trace::Meta;

    fn entry(op: Op, pc: Option<u64>) -> Entry {
        Entry {
            op,
            meta: Meta {
                pc,
                ..Meta::default()
            },
        }
    }

    fn write(addr: u64) -> Op {
        Op::Write {
            addr,
            data: vec![1],
            nt: false,
        }
    }

    #[test]
    fn only_user_space_accesses_make_program_pm() {
        let mut pm = ProgramPm::default();
        pm.note(&entry(write(0x5000), Some(0xffff_ffff_8100_0000)));
        pm.note(&entry(write(0x6000), None));
        assert!(
            !pm.is_known(),
            "kernel stores and unknown code are not the program's"
        );
        pm.note(&entry(
            Op::Read {
                addr: 0x7010,
                size: 8,
            },
            Some(0x7fff_f7f8_b90a),
        ));
        pm.note(&entry(write(0x9ff8), Some(0x5555_5555_794b)));
        assert!(pm.is_known());
        let pages: Vec<u64> = [0x5000, 0x6000, 0x7000, 0x9000, 0xa000]
            .into_iter()
            .filter(|a| pm.pages.contains(&(a >> PAGE_SHIFT)))
            .collect();
        assert_eq!(pages, [0x7000, 0x9000]);
    }
}
