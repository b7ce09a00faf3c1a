//! LEB128 varints and zigzag deltas: small numbers and small address steps take one or two
//! bytes, which is what most entries of a trace hold.

/// The previous values that addresses are delta-encoded against; encoder and decoder
/// update theirs alike.
#[derive(Default)]
pub(crate) struct DeltaBase {
    pub(crate) pm_addr: u64,
    pub(crate) blk_offset: u64,
    pub(crate) pc: u64,
}

pub(crate) fn put_uvarint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// `value - prev` as a zigzag-encoded number, so that steps back are as short as steps
/// forward. Wrapping keeps every pair of u64 values representable.
pub(crate) fn delta(prev: u64, value: u64) -> u64 {
    let d = value.wrapping_sub(prev) as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// Inverse of [`delta`].
pub(crate) fn undelta(prev: u64, zigzag: u64) -> u64 {
    let d = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
    prev.wrapping_add(d as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_invert_and_small_steps_are_small() {
        for (prev, value) in [(0, 0), (100, 99), (99, 100), (0, u64::MAX), (u64::MAX, 0)] {
            assert_eq!(undelta(prev, delta(prev, value)), value);
        }
        assert_eq!(delta(100, 99), 1);
        assert_eq!(delta(99, 100), 2);
    }

    #[test]
    fn uvarint_uses_seven_bits_per_byte() {
        let mut buf = Vec::new();
        put_uvarint(&mut buf, 0x7f);
        assert_eq!(buf, [0x7f]);
        buf.clear();
        put_uvarint(&mut buf, 300);
        assert_eq!(buf, [0xac, 0x02]);
        buf.clear();
        put_uvarint(&mut buf, u64::MAX);
        assert_eq!(buf.len(), 10);
    }
}
