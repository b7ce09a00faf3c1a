//! Classifies x86-64 instructions from their bytes, at translation time, into what the
//! tracer must know: non-temporal stores, cache-line flushes (with their memory operand,
//! because QEMU executes them as no-ops and reports no access), fences, locked and
//! serializing instructions, and `cpuid` (the hypercall).

use persim_trace::{FenceKind, FlushKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Any other instruction: its stores are cached stores.
    Plain,
    /// movnti, movntps/pd, movntss/sd, movntq, movntdq, maskmov*, and their VEX/EVEX forms.
    NtStore,
    /// movs/stos (with or without rep): QEMU reports one store per element.
    StringStore,
    Flush(FlushKind, MemOperand),
    /// sfence or mfence.
    Fence(FenceKind),
    /// A lock-prefixed instruction or xchg with memory.
    Locked,
    /// wrmsr, mov to a control register, serialize (cpuid is `Cpuid`).
    Serializing,
    /// iret: the return from an interrupt or exception (serializing too).
    Iret,
    Cpuid,
    /// A near call (e8, or ff /2): pushes the return address (shadow stacks).
    Call,
    /// A near return (c3, c2 imm16).
    Ret,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    Fs,
    Gs,
}

/// A ModRM memory operand. Registers are numbered as in the encoding (0 = rax, 1 = rcx,
/// 2 = rdx, 3 = rbx, 4 = rsp, 5 = rbp, 6 = rsi, 7 = rdi, 8..15 = r8..r15).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemOperand {
    pub base: Option<u8>,
    pub index: Option<(u8, u8)>,
    pub disp: i64,
    /// The displacement is relative to the next instruction's address.
    pub rip_relative: bool,
    pub segment: Option<Segment>,
    /// 0x67 prefix: the address is truncated to 32 bits.
    pub addr32: bool,
}

impl MemOperand {
    /// The effective address, given the instruction's address and length and a register
    /// reader (`reg(n)` for a GPR, `seg_base(s)` for fs/gs).
    pub fn address(
        &self,
        pc: u64,
        len: u64,
        reg: impl Fn(u8) -> u64,
        seg_base: impl Fn(Segment) -> u64,
    ) -> u64 {
        let mut addr = self.disp as u64;
        if self.rip_relative {
            addr = addr.wrapping_add(pc.wrapping_add(len));
        }
        if let Some(base) = self.base {
            addr = addr.wrapping_add(reg(base));
        }
        if let Some((index, scale)) = self.index {
            addr = addr.wrapping_add(reg(index).wrapping_mul(u64::from(scale)));
        }
        if self.addr32 {
            addr &= 0xffff_ffff;
        }
        match self.segment {
            Some(segment) => addr.wrapping_add(seg_base(segment)),
            None => addr,
        }
    }
}

#[derive(Default)]
struct Prefixes {
    lock: bool,
    opsize: bool,
    addr32: bool,
    segment: Option<Segment>,
    rex: u8,
}

pub fn classify(bytes: &[u8]) -> Class {
    classify_opt(bytes).unwrap_or(Class::Plain)
}

/// The legacy and REX prefixes, and where the opcode starts.
fn prefixes(bytes: &[u8]) -> Option<(Prefixes, usize)> {
    let mut p = Prefixes::default();
    let mut i = 0;
    loop {
        match *bytes.get(i)? {
            0xf0 => p.lock = true,
            0x66 => p.opsize = true,
            0x67 => p.addr32 = true,
            0x64 => p.segment = Some(Segment::Fs),
            0x65 => p.segment = Some(Segment::Gs),
            // rep prefixes, and segment overrides that 64-bit mode ignores
            0xf2 | 0xf3 | 0x26 | 0x2e | 0x36 | 0x3e => {}
            _ => break,
        }
        i += 1;
    }
    if let rex @ 0x40..=0x4f = *bytes.get(i)? {
        p.rex = rex;
        i += 1;
    }
    Some((p, i))
}

fn classify_opt(bytes: &[u8]) -> Option<Class> {
    let (p, i) = prefixes(bytes)?;
    if p.lock {
        return Some(Class::Locked);
    }
    let op = *bytes.get(i)?;
    let rest = &bytes[i + 1..];
    match op {
        0x0f => classify_0f(rest, &p),
        0xc4 | 0xc5 | 0x62 => classify_vex(op, rest),
        0x86 | 0x87 if modrm_is_memory(*rest.first()?) => Some(Class::Locked),
        0xa4 | 0xa5 | 0xaa | 0xab => Some(Class::StringStore),
        0xcf => Some(Class::Iret),
        0xe8 => Some(Class::Call),
        0xff if (*rest.first()? >> 3) & 7 == 2 => Some(Class::Call),
        0xc3 | 0xc2 => Some(Class::Ret),
        _ => Some(Class::Plain),
    }
}

/// The element size of a `rep movs`/`rep stos` (either rep prefix) with 64-bit addressing
/// and no segment override, whose destination is `[rdi]`: the counting mode accounts
/// these per execution (`crate::string_stores`). `None` for any other instruction.
pub fn rep_string_store(bytes: &[u8]) -> Option<u64> {
    let (p, i) = prefixes(bytes)?;
    let rep = bytes[..i].iter().any(|b| matches!(b, 0xf2 | 0xf3));
    if !rep || p.lock || p.addr32 || p.segment.is_some() {
        return None;
    }
    match *bytes.get(i)? {
        0xa4 | 0xaa => Some(1),
        0xa5 | 0xab if p.rex & 0x08 != 0 => Some(8),
        0xa5 | 0xab if p.opsize => Some(2),
        0xa5 | 0xab => Some(4),
        _ => None,
    }
}

/// Where an instruction's stores go, as far as its bytes tell (the counting mode leaves
/// kernel stores that cannot reach PM or a device uninstrumented; docs/results/performance.md,
/// "Counting mode"). Forms not recognised are `Anywhere`: they only cost speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreTarget {
    /// `push` (of a register, an immediate or the flags), a near call (its return
    /// address), or a store to a memory operand based on rsp alone (spills).
    Stack,
    /// A store to a `%gs`-relative memory operand: in the kernel, per-CPU data.
    PerCpu,
    /// A store to an address fixed at translation time (RIP-relative, or absolute with
    /// neither base nor index): a global variable.
    Fixed(u64),
    Anywhere,
}

/// The target of the stores of the instruction at `pc`, `len` bytes long.
pub fn store_target(bytes: &[u8], pc: u64, len: u64) -> StoreTarget {
    target(bytes, pc, len).unwrap_or(StoreTarget::Anywhere)
}

fn target(bytes: &[u8], pc: u64, len: u64) -> Option<StoreTarget> {
    let (p, i) = prefixes(bytes)?;
    let op = *bytes.get(i)?;
    let rest = &bytes[i + 1..];
    let modrm_reg = |at: usize| rest.get(at).map(|m| (m >> 3) & 7);
    // Opcodes whose only store is to their ModRM operand, and where that operand starts.
    let operand_at = match op {
        0x50..=0x57 | 0x68 | 0x6a | 0x9c | 0xe8 => return Some(StoreTarget::Stack),
        // call r/m and push r/m: they read the operand and store to the stack
        0xff if matches!(modrm_reg(0)?, 2 | 6) => return Some(StoreTarget::Stack),
        // add, or, adc, sbb, and, sub, xor (and cmp) to r/m; group 1 with an immediate;
        // xchg; mov; shifts and rotates; inc, dec, not, neg
        0x00..=0x3f if op & 6 == 0 => 0,
        0x80 | 0x81 | 0x83 | 0x86 | 0x87 | 0x88 | 0x89 | 0xc6 | 0xc7 => 0,
        0xc0 | 0xc1 | 0xd0..=0xd3 => 0,
        0xfe | 0xff if modrm_reg(0)? <= 1 => 0,
        0xf6 | 0xf7 if matches!(modrm_reg(0)?, 2 | 3) => 0,
        // setcc, cmpxchg, xadd, movnti, cmpxchg8b/16b (bts and its kin are left out: a
        // register bit offset reaches beyond the operand)
        0x0f => match *rest.first()? {
            0x90..=0x9f | 0xb0 | 0xb1 | 0xc0 | 0xc1 | 0xc3 => 1,
            0xc7 if modrm_reg(1)? == 1 => 1,
            _ => return None,
        },
        _ => return None,
    };
    let operand = mem_operand(&rest[operand_at..], &p)?;
    Some(match operand {
        MemOperand {
            segment: Some(Segment::Gs),
            ..
        } => StoreTarget::PerCpu,
        MemOperand {
            segment: Some(Segment::Fs),
            ..
        }
        | MemOperand { addr32: true, .. } => StoreTarget::Anywhere,
        MemOperand {
            base: Some(4),
            index: None,
            ..
        } => StoreTarget::Stack,
        MemOperand {
            base: None,
            index: None,
            ..
        } => StoreTarget::Fixed(operand.address(pc, len, |_| 0, |_| 0)),
        _ => StoreTarget::Anywhere,
    })
}

fn modrm_is_memory(modrm: u8) -> bool {
    modrm >> 6 != 3
}

fn classify_0f(rest: &[u8], p: &Prefixes) -> Option<Class> {
    let op = *rest.first()?;
    match op {
        0xa2 => Some(Class::Cpuid),
        0xc3 | 0x2b | 0xe7 | 0xf7 => Some(Class::NtStore),
        0x30 | 0x22 => Some(Class::Serializing),
        0x01 if rest.get(1) == Some(&0xe8) && !p.opsize => Some(Class::Serializing),
        0xae => {
            let modrm = *rest.get(1)?;
            let reg = (modrm >> 3) & 7;
            if !modrm_is_memory(modrm) {
                return Some(match reg {
                    7 => Class::Fence(FenceKind::Sfence),
                    6 => Class::Fence(FenceKind::Mfence),
                    _ => Class::Plain,
                });
            }
            let kind = match (reg, p.opsize) {
                (7, false) => FlushKind::Clflush,
                (7, true) => FlushKind::Clflushopt,
                (6, true) => FlushKind::Clwb,
                _ => return Some(Class::Plain),
            };
            Some(Class::Flush(kind, mem_operand(&rest[1..], p)?))
        }
        _ => Some(Class::Plain),
    }
}

/// VEX (c4/c5) and EVEX (62) encodings in map 0f: opcodes 2b and e7 are the vmovnt* stores.
fn classify_vex(escape: u8, rest: &[u8]) -> Option<Class> {
    let (map, op) = match escape {
        0xc5 => (1, *rest.get(1)?),
        0xc4 => (*rest.first()? & 0x1f, *rest.get(2)?),
        _ => (*rest.first()? & 0x3, *rest.get(3)?),
    };
    Some(if map == 1 && matches!(op, 0x2b | 0xe7) {
        Class::NtStore
    } else {
        Class::Plain
    })
}

/// Decodes ModRM (+ SIB + displacement) starting at `bytes[0]`; None for a register operand.
fn mem_operand(bytes: &[u8], p: &Prefixes) -> Option<MemOperand> {
    let modrm = *bytes.first()?;
    let (md, rm) = (modrm >> 6, modrm & 7);
    if md == 3 {
        return None;
    }
    let rex_b = (p.rex & 1) << 3;
    let rex_x = (p.rex & 2) << 2;
    let mut operand = MemOperand {
        base: None,
        index: None,
        disp: 0,
        rip_relative: false,
        segment: p.segment,
        addr32: p.addr32,
    };
    let mut at = 1;
    if rm == 4 {
        let sib = *bytes.get(at)?;
        at += 1;
        let index = ((sib >> 3) & 7) | rex_x;
        if index != 4 {
            operand.index = Some((index, 1 << (sib >> 6)));
        }
        if sib & 7 == 5 && md == 0 {
            operand.disp = i64::from(read_i32(bytes, at)?);
            return Some(operand);
        }
        operand.base = Some((sib & 7) | rex_b);
    } else if rm == 5 && md == 0 {
        operand.rip_relative = true;
        operand.disp = i64::from(read_i32(bytes, at)?);
        return Some(operand);
    } else {
        operand.base = Some(rm | rex_b);
    }
    operand.disp = match md {
        1 => i64::from(*bytes.get(at)? as i8),
        2 => i64::from(read_i32(bytes, at)?),
        _ => 0,
    };
    Some(operand)
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings as GNU as produces them (see the comment on each).
    fn flush(bytes: &[u8]) -> (FlushKind, MemOperand) {
        match classify(bytes) {
            Class::Flush(kind, op) => (kind, op),
            other => panic!("{bytes:02x?}: {other:?}"),
        }
    }

    fn regs(n: u8) -> u64 {
        0x1000 * (u64::from(n) + 1)
    }

    fn no_seg(_: Segment) -> u64 {
        0
    }

    #[test]
    fn flushes_with_their_effective_addresses() {
        // clwb (%rdi)
        let (kind, op) = flush(&[0x66, 0x0f, 0xae, 0x37]);
        assert_eq!(
            (kind, op.address(0, 4, regs, no_seg)),
            (FlushKind::Clwb, regs(7))
        );
        // clflushopt 0x40(%rax)
        let (kind, op) = flush(&[0x66, 0x0f, 0xae, 0x78, 0x40]);
        assert_eq!(
            (kind, op.address(0, 5, regs, no_seg)),
            (FlushKind::Clflushopt, regs(0) + 0x40)
        );
        // clflush (%rax,%rbx,8)
        let (kind, op) = flush(&[0x0f, 0xae, 0x3c, 0xd8]);
        assert_eq!(
            (kind, op.address(0, 4, regs, no_seg)),
            (FlushKind::Clflush, regs(0) + 8 * regs(3))
        );
        // clflush 0x1000(%rip) at 0xd, 7 bytes long
        let (_, op) = flush(&[0x0f, 0xae, 0x3d, 0x00, 0x10, 0x00, 0x00]);
        assert_eq!(op.address(0xd, 7, regs, no_seg), 0x1014);
        // clwb -0x8(%r12,%r13,2)
        let (kind, op) = flush(&[0x66, 0x43, 0x0f, 0xae, 0x74, 0x6c, 0xf8]);
        assert_eq!(
            (kind, op.address(0, 7, regs, no_seg)),
            (FlushKind::Clwb, regs(12) + 2 * regs(13) - 8)
        );
        // clwb %gs:(%rdi)
        let (_, op) = flush(&[0x65, 0x66, 0x0f, 0xae, 0x37]);
        assert_eq!(
            op.address(0, 5, regs, |s| if s == Segment::Gs { 0x10_0000 } else { 0 }),
            0x10_0000 + regs(7)
        );
    }

    #[test]
    fn fences_and_look_alikes() {
        assert_eq!(
            classify(&[0x0f, 0xae, 0xf8]),
            Class::Fence(FenceKind::Sfence)
        );
        assert_eq!(
            classify(&[0x0f, 0xae, 0xf0]),
            Class::Fence(FenceKind::Mfence)
        );
        // lfence orders loads only; xsaveopt (%rdi) shares clwb's opcode without 0x66.
        assert_eq!(classify(&[0x0f, 0xae, 0xe8]), Class::Plain);
        assert_eq!(classify(&[0x0f, 0xae, 0x37]), Class::Plain);
    }

    #[test]
    fn non_temporal_stores() {
        for bytes in [
            &[0x48, 0x0f, 0xc3, 0x07][..],         // movnti %rax,(%rdi)
            &[0x66, 0x0f, 0xe7, 0x07],             // movntdq %xmm0,(%rdi)
            &[0x0f, 0x2b, 0x4e, 0x10],             // movntps %xmm1,0x10(%rsi)
            &[0x0f, 0xe7, 0x07],                   // movntq %mm0,(%rdi)
            &[0xc5, 0xfd, 0xe7, 0x07],             // vmovntdq %ymm0,(%rdi)
            &[0xc4, 0x41, 0x7d, 0x2b, 0x01],       // vmovntpd %ymm8,(%r9)
            &[0x62, 0xf1, 0x7d, 0x48, 0xe7, 0x0f], // vmovntdq %zmm1,(%rdi)
        ] {
            assert_eq!(classify(bytes), Class::NtStore, "{bytes:02x?}");
        }
        assert_eq!(classify(&[0x48, 0x89, 0x07]), Class::Plain); // mov %rax,(%rdi)
    }

    #[test]
    fn string_stores() {
        assert_eq!(classify(&[0xf3, 0xa4]), Class::StringStore); // rep movsb
        assert_eq!(classify(&[0xf3, 0x48, 0xab]), Class::StringStore); // rep stos %rax,(%rdi)
        assert_eq!(classify(&[0x66, 0xa5]), Class::StringStore); // movsw
        assert_eq!(classify(&[0xf3, 0xa6]), Class::Plain); // repz cmpsb
    }

    #[test]
    fn locked_serializing_and_cpuid() {
        assert_eq!(classify(&[0xf0, 0x48, 0x83, 0x07, 0x01]), Class::Locked); // lock addq $1,(%rdi)
        assert_eq!(classify(&[0x48, 0x87, 0x07]), Class::Locked); // xchg %rax,(%rdi)
        assert_eq!(classify(&[0x48, 0x87, 0xc3]), Class::Plain); // xchg %rax,%rbx
        assert_eq!(classify(&[0x48, 0xcf]), Class::Iret); // iretq
        assert_eq!(classify(&[0x0f, 0xa2]), Class::Cpuid);
        assert_eq!(classify(&[0x0f]), Class::Plain);
    }

    #[test]
    fn store_targets() {
        use StoreTarget::*;
        let target = |bytes: &[u8]| store_target(bytes, 0x1000, bytes.len() as u64);
        for bytes in [
            &[0x55][..],                           // push %rbp
            &[0x41, 0x57],                         // push %r15
            &[0x6a, 0x00],                         // push $0
            &[0x9c],                               // pushf
            &[0xe8, 0, 0, 0, 0],                   // call rel32
            &[0xff, 0xd0],                         // call *%rax
            &[0xff, 0x75, 0x08],                   // push 0x8(%rbp)
            &[0x48, 0x89, 0x04, 0x24],             // mov %rax,(%rsp)
            &[0x48, 0x89, 0x44, 0x24, 0x08],       // mov %rax,0x8(%rsp)
            &[0xc7, 0x44, 0x24, 0x10, 1, 0, 0, 0], // movl $1,0x10(%rsp)
            &[0x88, 0x54, 0x24, 0x07],             // mov %dl,0x7(%rsp)
            &[0x48, 0x01, 0x04, 0x24],             // add %rax,(%rsp)
            &[0xf0, 0x48, 0x0f, 0xb1, 0x0c, 0x24], // lock cmpxchg %rcx,(%rsp)
        ] {
            assert_eq!(target(bytes), Stack, "{bytes:02x?}");
        }
        for bytes in [
            &[0x65, 0x48, 0x89, 0x04, 0x24][..], // mov %rax,%gs:(%rsp)
            // addl $1,%gs:0x7e8a1234 (preempt_count_add)
            &[0x65, 0x83, 0x04, 0x25, 0x34, 0x12, 0x8a, 0x7e, 0x01],
            &[0x65, 0xff, 0x0d, 0x34, 0x12, 0, 0], // decl %gs:0x1234(%rip)
            &[0x65, 0x48, 0x89, 0x07],             // mov %rax,%gs:(%rdi)
            &[0x65, 0x48, 0x0f, 0xb1, 0x0a],       // cmpxchg %rcx,%gs:(%rdx)
        ] {
            assert_eq!(target(bytes), PerCpu, "{bytes:02x?}");
        }
        // mov %rax,0x10(%rip): the address is after the instruction
        assert_eq!(
            target(&[0x48, 0x89, 0x05, 0x10, 0, 0, 0]),
            Fixed(0x1000 + 7 + 0x10)
        );
        // movl $1,-0x10(%rip): the immediate counts in the instruction's length
        assert_eq!(
            target(&[0xc7, 0x05, 0xf0, 0xff, 0xff, 0xff, 1, 0, 0, 0]),
            Fixed(0x1000 + 10 - 0x10)
        );
        // mov %rax,0xffffffff82001000 (absolute, sign-extended)
        assert_eq!(
            target(&[0x48, 0x89, 0x04, 0x25, 0x00, 0x10, 0x00, 0x82]),
            Fixed(0xffff_ffff_8200_1000)
        );
        for bytes in [
            &[0x48, 0x89, 0x07][..],                     // mov %rax,(%rdi)
            &[0x49, 0x89, 0x04, 0x24],                   // mov %rax,(%r12)
            &[0x48, 0x89, 0x04, 0x0c],                   // mov %rax,(%rsp,%rcx,1)
            &[0x48, 0x89, 0x45, 0x08],                   // mov %rax,0x8(%rbp)
            &[0x48, 0x89, 0x04, 0xd5, 0, 0x10, 0, 0x82], // mov %rax,arr(,%rdx,8)
            &[0x64, 0x48, 0x89, 0x07],                   // mov %rax,%fs:(%rdi)
            &[0x67, 0x48, 0x89, 0x05, 0x10, 0, 0, 0],    // mov %rax,0x10(%eip)
            &[0x65, 0x48, 0x0f, 0xab, 0x07],             // bts %rax,%gs:(%rdi)
            &[0x65, 0xf3, 0xab],                         // rep stos: es:(%rdi)
            &[0x48, 0x89, 0xe5],                         // mov %rsp,%rbp: no store
            &[0xff, 0x07],                               // incl (%rdi)
        ] {
            assert_eq!(target(bytes), Anywhere, "{bytes:02x?}");
        }
    }

    #[test]
    fn rep_string_stores_and_their_element_sizes() {
        assert_eq!(rep_string_store(&[0xf3, 0xa4]), Some(1)); // rep movsb
        assert_eq!(rep_string_store(&[0xf3, 0xaa]), Some(1)); // rep stosb
        assert_eq!(rep_string_store(&[0xf3, 0x48, 0xa5]), Some(8)); // rep movsq
        assert_eq!(rep_string_store(&[0xf3, 0x48, 0xab]), Some(8)); // rep stosq
        assert_eq!(rep_string_store(&[0xf3, 0xab]), Some(4)); // rep stosl
        assert_eq!(rep_string_store(&[0x66, 0xf3, 0xab]), Some(2)); // rep stosw
        assert_eq!(rep_string_store(&[0xf2, 0xa4]), Some(1)); // repne movsb repeats too
        assert_eq!(rep_string_store(&[0xaa]), None); // stosb: one element, kept per store
        assert_eq!(rep_string_store(&[0x67, 0xf3, 0xaa]), None); // edi: not accounted
        assert_eq!(rep_string_store(&[0x64, 0xf3, 0xa4]), None);
        assert_eq!(rep_string_store(&[0xf3, 0xa6]), None); // repe cmpsb stores nothing
        assert_eq!(rep_string_store(&[0xf3, 0x0f, 0xb8, 0xc0]), None); // popcnt
    }

    #[test]
    fn calls_and_returns() {
        assert_eq!(classify(&[0xe8, 0, 0, 0, 0]), Class::Call); // call rel32
        assert_eq!(classify(&[0xff, 0xd0]), Class::Call); // call *%rax
        assert_eq!(classify(&[0x41, 0xff, 0xd3]), Class::Call); // call *%r11
        assert_eq!(classify(&[0x3e, 0xff, 0x14, 0x25, 0, 0, 0, 0]), Class::Call); // notrack call *abs
        assert_eq!(classify(&[0xff, 0x55, 0x08]), Class::Call); // call *8(%rbp)
        assert_eq!(classify(&[0xff, 0xe0]), Class::Plain); // jmp *%rax
        assert_eq!(classify(&[0xff, 0x1f]), Class::Plain); // lcall *(%rdi)
        assert_eq!(classify(&[0xff, 0x07]), Class::Plain); // incl (%rdi)
        assert_eq!(classify(&[0xc3]), Class::Ret);
        assert_eq!(classify(&[0xf3, 0xc3]), Class::Ret); // rep ret
        assert_eq!(classify(&[0xc2, 0x08, 0x00]), Class::Ret); // ret $8
        assert_eq!(classify(&[0xcb]), Class::Plain); // lret
    }
}
