//! Proptest strategies for arbitrary valid entries and traces.
// Each test crate that includes this file uses only some of the strategies.
#![allow(dead_code)]

use persim_trace::{
    Arg, Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op, Task, BLOCK_SIZE,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// Addresses near each other, far apart and at the ends of the u64 range, so that the
/// binary form's deltas are tested in every direction.
fn address() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..0x1_0000, any::<u64>(), Just(u64::MAX)]
}

fn op() -> impl Strategy<Value = Op> {
    let flush_kind = prop_oneof![
        Just(FlushKind::Clwb),
        Just(FlushKind::Clflushopt),
        Just(FlushKind::Clflush)
    ];
    let fence_kind = prop_oneof![
        Just(FenceKind::Sfence),
        Just(FenceKind::Mfence),
        Just(FenceKind::Locked),
        Just(FenceKind::Serializing)
    ];
    let hypercall = prop_oneof![
        Just(Hypercall::Start),
        any::<u64>().prop_map(Hypercall::Checkpoint),
        Just(Hypercall::Success),
        Just(Hypercall::Fail),
        (address(), any::<u64>()).prop_map(|(addr, len)| Hypercall::Volatile { addr, len })
    ];
    let blk_write = (0..u64::MAX / BLOCK_SIZE, 1..=3usize).prop_flat_map(|(block, blocks)| {
        vec(any::<u8>(), blocks * BLOCK_SIZE as usize).prop_map(move |data| Op::BlkWrite {
            offset: block * BLOCK_SIZE,
            data,
        })
    });
    prop_oneof![
        6 => (address(), vec(any::<u8>(), 1..=64), any::<bool>())
            .prop_map(|(addr, data, nt)| Op::Write { addr, data, nt }),
        1 => (address(), any::<u64>()).prop_map(|(addr, size)| Op::Read { addr, size }),
        2 => (flush_kind, address()).prop_map(|(kind, addr)| Op::Flush { kind, addr }),
        2 => fence_kind.prop_map(Op::Fence),
        1 => hypercall.prop_map(Op::Hypercall),
        1 => blk_write,
        1 => (address(), any::<u64>()).prop_map(|(offset, size)| Op::BlkRead { offset, size }),
        1 => Just(Op::BlkFlush),
        1 => ("[a-z_][a-z0-9_.]{0,20}", vec(arg(), 0..=6))
            .prop_map(|(name, args)| Op::Call { name, args }),
        1 => ("[a-z_][a-z0-9_.]{0,20}", arg())
            .prop_map(|(name, value)| Op::Return { name, value }),
    ]
}

fn arg() -> impl Strategy<Value = Arg> {
    prop_oneof![address().prop_map(Arg::Value), address().prop_map(Arg::Pm)]
}

fn meta() -> impl Strategy<Value = Meta> {
    prop_oneof![
        2 => Just(Meta::default()),
        1 => (proptest::option::of(address()), vec(address(), 0..5), proptest::option::of(task()))
            .prop_map(|(pc, stack, task)| Meta { pc, stack, task }),
    ]
}

pub fn entry() -> impl Strategy<Value = Entry> {
    (op(), meta()).prop_map(|(op, meta)| Entry { op, meta })
}

pub fn header() -> impl Strategy<Value = Header> {
    (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
        |(pm_base, pm_size, blk_size, flags)| Header {
            pm_base,
            pm_size,
            blk_size,
            flags,
        },
    )
}

/// Any thread, with names that need the text form's escapes (spaces, `%`, `#`, `@`, UTF-8).
fn task() -> impl Strategy<Value = Task> {
    (any::<u32>(), any::<u32>(), "[a-z0-9/: %#@=,é]{0,15}").prop_map(|(pid, tid, comm)| Task {
        pid,
        tid,
        comm,
    })
}
