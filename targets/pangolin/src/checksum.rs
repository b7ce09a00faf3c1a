//! Adler32 checksums of objects, computed whole with `simd-adler32` and updated in place.
//!
//! `simd-adler32` computes a checksum over a stream but cannot change one for bytes replaced in the
//! middle of it, so [`update`] does that from Adler32's definition: over a stream of `n`
//! bytes, `A = 1 + Σ dᵢ` and `B = n + Σ (n − i)·dᵢ` (mod 65521, `i` from 0), both linear in
//! each byte. Replacing a range costs time in proportion to the range, not the object.

const MOD: u64 = 65521;
/// Streams shorter than this are summed a word at a time without SIMD; every sum stays far
/// below 2⁶⁴: one reduction at the end suffices.
const SHORT: usize = 64;

/// The Adler32 checksum of `parts`, one stream.
pub fn full(parts: &[&[u8]]) -> u32 {
    let n = parts.iter().map(|p| p.len()).sum::<usize>();
    // Headers and metadata lines are shorter than the SIMD setup is worth.
    if n < SHORT {
        return short(parts, n as u64);
    }
    // An object's header bytes before its data: summed as a short stream, SIMD continues
    // from that checksum over the data in one call (each call costs its setup).
    let (last, init) = parts
        .split_last()
        .expect("a stream of SHORT bytes has parts");
    let init_len = n - last.len();
    let mut adler = if init_len < SHORT {
        simd_adler32::Adler32::from_checksum(short(init, init_len as u64))
    } else {
        let mut adler = simd_adler32::Adler32::new();
        init.iter().for_each(|part| adler.write(part));
        adler
    };
    adler.write(last);
    adler.finish()
}

/// The checksum of `parts`, `n < SHORT` bytes, a word at a time: A = 1 + Σ dᵢ and
/// B = n + Σ (n − i)·dᵢ = n + n·Σ dᵢ − Σ i·dᵢ, from word sums.
fn short(parts: &[&[u8]], n: u64) -> u32 {
    let (mut sum, mut weighted, mut at) = (0u64, 0u64, 0u64);
    for part in parts {
        let words = part.chunks_exact(8);
        let tail = words.remainder();
        for word in words {
            let (s, w) = sums(le_word(word));
            sum += s as u64;
            weighted += at * s as u64 + w as u64;
            at += 8;
        }
        for &byte in tail {
            sum += u64::from(byte);
            weighted += at * u64::from(byte);
            at += 1;
        }
    }
    let (a, b) = ((1 + sum) % MOD, (n + n * sum - weighted) % MOD);
    ((b as u32) << 16) | a as u32
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
        let (old_words, new_words) = (old.chunks_exact(8), new.chunks_exact(8));
        let tail = old.len() - old_words.remainder().len();
        for (w, (o, n)) in old_words.zip(new_words).enumerate() {
            let (o, n) = (le_word(o), le_word(n));
            if o != n {
                let (so, wo) = sums(o);
                let (sn, wn) = sums(n);
                let delta = sn - so;
                d += delta;
                id += (8 * w) as i64 * delta + wn - wo;
            }
        }
        for (i, (&o, &n)) in old[tail..].iter().zip(&new[tail..]).enumerate() {
            let delta = i64::from(n) - i64::from(o);
            d += delta;
            id += (tail + i) as i64 * delta;
        }
        let first = (len - at - (k * BLOCK) as u64) % MOD;
        a = (a + d).rem_euclid(m);
        b = (b + (first as i64 * d.rem_euclid(m)) % m - id.rem_euclid(m)).rem_euclid(m);
    }
    ((b as u32) << 16) | a as u32
}

/// [`update`] for one byte `at` changed from `old` to `new`: `A` gains the change `d`,
/// `B` gains `(len − at)·d`, with none of `update`'s loops (a commit mark's state, a
/// bitmap byte).
pub fn update_byte(sum: u32, len: u64, at: u64, old: u8, new: u8) -> u32 {
    debug_assert!(at < len);
    let d = (u64::from(new) + MOD - u64::from(old)) % MOD;
    let a = (u64::from(sum & 0xffff) + d) % MOD;
    let b = (u64::from(sum >> 16) + (len - at) % MOD * d) % MOD;
    ((b as u32) << 16) | a as u32
}

fn le_word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
}

/// The sum of a word's eight bytes `bᵢ` (little-endian, `i` from 0) and `Σ i·bᵢ`, a few
/// multiplications instead of eight steps: the even and odd bytes in 16-bit lanes, whose
/// sums and weighted sums stay below 2¹⁶, so no lane carries into the next.
fn sums(word: u64) -> (i64, i64) {
    const LANES: u64 = 0x00ff_00ff_00ff_00ff;
    let (even, odd) = (word & LANES, (word >> 8) & LANES);
    let pairs = even + odd;
    // Lane 3 of x·0x0001_0001_0001_0001 is Σ xₖ, and of x·0x0000_0001_0002_0003 is Σ k·xₖ.
    let sum = pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48;
    let odd_sum = odd.wrapping_mul(0x0001_0001_0001_0001) >> 48;
    let weighted = pairs.wrapping_mul(0x0000_0001_0002_0003) >> 48;
    // Byte 2k + j sits in lane k: Σ i·bᵢ = 2·Σ k·(pairsₖ) + Σ oddₖ.
    (sum as i64, (2 * weighted + odd_sum) as i64)
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
        fn word_sums_match_the_bytes(word in any::<u64>()) {
            let bytes = word.to_le_bytes();
            let sum: i64 = bytes.iter().map(|&b| i64::from(b)).sum();
            let weighted: i64 = bytes.iter().enumerate().map(|(i, &b)| i as i64 * i64::from(b)).sum();
            prop_assert_eq!(sums(word), (sum, weighted));
        }

        #[test]
        fn streams_match_the_simd_sum(
            // Short streams, and long ones with a short or a long head before the last part.
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..4),
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

        #[test]
        fn updating_a_byte_equals_updating_its_range(
            stream in proptest::collection::vec(any::<u8>(), 1..6000),
            at in any::<prop::sample::Index>(),
            new in any::<u8>(),
        ) {
            let at = at.index(stream.len());
            let (len, sum) = (stream.len() as u64, full(&[&stream]));
            prop_assert_eq!(
                update_byte(sum, len, at as u64, stream[at], new),
                update(sum, len, at as u64, &stream[at..=at], &[new])
            );
        }
    }
}
