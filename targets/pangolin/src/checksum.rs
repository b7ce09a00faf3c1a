//! Adler32 checksums of objects, computed whole with `adler2` and updated in place.
//!
//! `adler2` computes a checksum over a stream but cannot change one for bytes replaced in the
//! middle of it, so [`update`] does that from Adler32's definition: over a stream of `n`
//! bytes, `A = 1 + Σ dᵢ` and `B = n + Σ (n − i)·dᵢ` (mod 65521, `i` from 0), both linear in
//! each byte. Replacing a range costs time in proportion to the range, not the object.

const MOD: u64 = 65521;

/// The Adler32 checksum of `parts`, one stream.
pub fn full(parts: &[&[u8]]) -> u32 {
    let mut adler = adler2::Adler32::new();
    for part in parts {
        adler.write_slice(part);
    }
    adler.checksum()
}

/// The checksum of a stream of `len` bytes whose bytes `at..at + old.len()` changed from
/// `old` to `new`, given its checksum `sum` before the change.
pub fn update(sum: u32, len: u64, at: u64, old: &[u8], new: &[u8]) -> u32 {
    debug_assert_eq!(old.len(), new.len());
    debug_assert!(at + old.len() as u64 <= len);
    let (mut a, mut b) = (u64::from(sum & 0xffff), u64::from(sum >> 16));
    for (i, (&o, &n)) in old.iter().zip(new).enumerate() {
        // The byte's change, kept non-negative modulo MOD.
        let delta = (u64::from(n) + MOD - u64::from(o)) % MOD;
        let weight = (len - at - i as u64) % MOD;
        a += delta;
        b += weight * delta % MOD;
    }
    ((b % MOD) << 16 | (a % MOD)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_whole_stream_matches_the_reference_value() {
        // Adler32 of "Wikipedia", the worked example of the algorithm's definition.
        assert_eq!(full(&[b"Wiki", b"pedia"]), 0x11e6_0398);
    }

    proptest! {
        #[test]
        fn updating_a_range_equals_recomputing(
            stream in proptest::collection::vec(any::<u8>(), 1..6000),
            at in any::<prop::sample::Index>(),
            patch in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let at = at.index(stream.len());
            let end = (at + patch.len()).min(stream.len());
            let mut changed = stream.clone();
            changed[at..end].copy_from_slice(&patch[..end - at]);
            let sum = update(full(&[&stream]), stream.len() as u64, at as u64, &stream[at..end], &changed[at..end]);
            prop_assert_eq!(sum, full(&[&changed]));
        }
    }
}
