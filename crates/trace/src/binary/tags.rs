//! The tag byte that starts every encoded entry: the operation in the low 7 bits, and
//! `META` when metadata follows the operation's fields.

pub(crate) const END: u8 = 0x00;
pub(crate) const WRITE: u8 = 0x01;
pub(crate) const NTWRITE: u8 = 0x02;
pub(crate) const READ: u8 = 0x03;
pub(crate) const FLUSH_CLWB: u8 = 0x04;
pub(crate) const FLUSH_CLFLUSHOPT: u8 = 0x05;
pub(crate) const FLUSH_CLFLUSH: u8 = 0x06;
pub(crate) const FENCE_SFENCE: u8 = 0x07;
pub(crate) const FENCE_MFENCE: u8 = 0x08;
pub(crate) const FENCE_LOCKED: u8 = 0x09;
pub(crate) const FENCE_SERIALIZING: u8 = 0x0a;
pub(crate) const HYPERCALL_START: u8 = 0x0b;
pub(crate) const HYPERCALL_CHECKPOINT: u8 = 0x0c;
pub(crate) const HYPERCALL_SUCCESS: u8 = 0x0d;
pub(crate) const HYPERCALL_FAIL: u8 = 0x0e;
pub(crate) const BLK_WRITE: u8 = 0x0f;
pub(crate) const BLK_READ: u8 = 0x10;
pub(crate) const BLK_FLUSH: u8 = 0x11;
pub(crate) const HYPERCALL_VOLATILE: u8 = 0x12;
pub(crate) const CALL: u8 = 0x13;
pub(crate) const RETURN: u8 = 0x14;
pub(crate) const FENCE_INTERRUPT: u8 = 0x15;

/// A call argument's kind byte.
pub(crate) const ARG_VALUE: u8 = 0;
pub(crate) const ARG_PM: u8 = 1;

pub(crate) const META: u8 = 0x80;

/// Bits of the metadata's field byte.
pub(crate) const META_PC: u8 = 0x01;
pub(crate) const META_STACK: u8 = 0x02;
pub(crate) const META_TASK: u8 = 0x04;

/// The zstd window, in log2 bytes. The decoder refuses larger windows, so a corrupt frame
/// header cannot make it allocate more than this.
pub(crate) const ZSTD_WINDOW_LOG: u32 = 22;
