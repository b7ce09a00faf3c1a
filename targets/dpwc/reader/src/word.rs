//! The self-checking words of the generation table: a value and, in the bytes above it,
//! the CRC-32C of its bytes, stored by the module in one aligned 8-byte store (whole or absent
//! after a crash), so a word whose CRC fails was damaged after it was written.

/// A generation's word: its id and [`crate::GEN_HELD_BIT`] in 6 bytes, 16 bits of CRC.
pub const GEN_WORD_BYTES: u32 = 6;
/// A chunk's `used` in 4 bytes, 32 bits of CRC.
pub const USED_WORD_BYTES: u32 = 4;

/// The word for `value` (which fits in `bytes` bytes); zero stays zero.
pub fn seal(value: u64, bytes: u32) -> u64 {
    if value == 0 {
        return 0;
    }
    let crc = u64::from(crc32c::crc32c(&value.to_le_bytes()[..bytes as usize]));
    value | crc << (bytes * 8)
}

/// The value of `word`, or `None` when its CRC fails.
pub fn unseal(word: u64, bytes: u32) -> Option<u64> {
    let value = word & ((1 << (bytes * 8)) - 1);
    (seal(value, bytes) == word).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC is CRC-32C of the value's bytes (layout 3 had zlib's crc32, 0x3ca0165b),
    /// as a bitwise CRC-32C of `(4352).to_bytes(4, "little")` gives it.
    #[test]
    fn a_word_is_its_value_and_the_crc_of_its_bytes() {
        assert_eq!(seal(4352, USED_WORD_BYTES), 4352 | 0x9d84_a433 << 32);
        assert_eq!(
            unseal(seal(4352, USED_WORD_BYTES), USED_WORD_BYTES),
            Some(4352)
        );
        assert_eq!(unseal(0, GEN_WORD_BYTES), Some(0));
        for bit in 0..64 {
            let word = seal(7, GEN_WORD_BYTES) ^ 1 << bit;
            assert_eq!(unseal(word, GEN_WORD_BYTES), None, "bit {bit}");
        }
    }
}
