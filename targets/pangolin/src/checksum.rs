//! Adler32 checksums of objects, computed whole with `simd-adler32` and updated in place.
//!
//! `simd-adler32` computes a checksum over a stream but cannot change one for bytes replaced in the
//! middle of it, so [`update`] does that from Adler32's definition: over a stream of `n`
//! bytes, `A = 1 + Σ dᵢ` and `B = n + Σ (n − i)·dᵢ` (mod 65521, `i` from 0), both linear in
//! each byte. Replacing a range costs time in proportion to the range, not the object.

const MOD: u64 = 65521;
/// Streams shorter than this are summed without SIMD; `a` stays below 1 + 64 · 255 and `b`
/// below 64 times that, both under 2²⁰: one reduction at the end suffices.
const SHORT: usize = 64;

/// The Adler32 checksum of `parts`, one stream.
pub fn full(parts: &[&[u8]]) -> u32 {
    // Headers and metadata lines are shorter than the SIMD setup is worth.
    if parts.iter().map(|p| p.len()).sum::<usize>() < SHORT {
        let (mut a, mut b) = (1u32, 0u32);
        for &byte in parts.iter().flat_map(|p| p.iter()) {
            a += u32::from(byte);
            b += a;
        }
        return ((b % MOD as u32) << 16) | (a % MOD as u32);
    }
    let mut adler = simd_adler32::Adler32::new();
    for part in parts {
        adler.write(part);
    }
    adler.finish()
}

/// The checksum of a stream of `len` bytes whose bytes `at..at + old.len()` changed from
/// `old` to `new`, given its checksum `sum` before the change.
///
/// With `dᵢ` the change of byte `at + i`, `A` gains `Σ dᵢ` and `B` gains
/// `(len − at)·Σ dᵢ − Σ i·dᵢ`; both sums are kept exact in `i64` over blocks of 1 MiB
/// (`|Σ i·dᵢ| < 2⁴⁸`), and 8-byte words that did not change are skipped whole.
pub fn update(sum: u32, len: u64, at: u64, old: &[u8], new: &[u8]) -> u32 {
    debug_assert_eq!(old.len(), new.len());
    debug_assert!(at + old.len() as u64 <= len);
    const BLOCK: usize = 1 << 20;
    let m = MOD as i64;
    let (mut a, mut b) = (i64::from(sum & 0xffff), i64::from(sum >> 16));
    for (k, (old, new)) in old.chunks(BLOCK).zip(new.chunks(BLOCK)).enumerate() {
        let (mut d, mut id) = (0i64, 0i64);
        let mut word = |base: usize, o: &[u8], n: &[u8]| {
            for (i, (&o, &n)) in o.iter().zip(n).enumerate() {
                let delta = i64::from(n) - i64::from(o);
                d += delta;
                id += (base + i) as i64 * delta;
            }
        };
        let (old_words, new_words) = (old.chunks_exact(8), new.chunks_exact(8));
        let tail = old.len() - old_words.remainder().len();
        for (w, (o, n)) in old_words.zip(new_words).enumerate() {
            if o != n {
                word(8 * w, o, n);
            }
        }
        word(tail, &old[tail..], &new[tail..]);
        let first = (len - at - (k * BLOCK) as u64) % MOD;
        a = (a + d).rem_euclid(m);
        b = (b + (first as i64 * d.rem_euclid(m)) % m - id.rem_euclid(m)).rem_euclid(m);
    }
    ((b as u32) << 16) | a as u32
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
        fn short_streams_match_the_simd_sum(
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..4),
        ) {
            let mut adler = simd_adler32::Adler32::new();
            parts.iter().for_each(|p| adler.write(p));
            let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(full(&parts), adler.finish());
        }

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
