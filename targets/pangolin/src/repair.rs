//! Finding which damaged bytes of an object to rebuild from parity.
//!
//! Where an object's bytes have a non-zero syndrome (their page column does not XOR to
//! zero), one row of the column is damaged: this object's, or another row's. A lost page or
//! a scribble shorter than a chunk row damages, in any one object, the inconsistent bytes
//! of one contiguous span shorter than a row. So the candidates are the object with the
//! inconsistent bytes of runs `i..=j` repaired (all of them first); the first whose
//! checksum holds wins. Adler32 is linear in each byte for a fixed stream length, so each
//! candidate's checksum is a sum of per-run terms: O(1) per candidate after O(object).

use std::collections::HashMap;

use crate::layout::OBJ_HEADER;
use crate::pool::Header;

const MOD: u64 = 65521;
/// Candidates tried per object, bounding the work on hopeless damage.
const MAX_CANDIDATES: usize = 1 << 20;

/// Where object byte `b` sits in the checksummed stream (the checksum field has none).
fn stream_pos(b: usize) -> Option<u64> {
    match b {
        0..8 => Some(b as u64),
        8..12 => None,
        _ => Some(b as u64 - 4),
    }
}

/// The object `current` (its extent) repaired with `syndrome`, if some candidate matches
/// its checksum. The object starts `within` bytes into a row of `row` bytes.
pub fn find(current: &[u8], syndrome: &[u8], within: u64, row: u64) -> Option<Vec<u8>> {
    let runs = runs(syndrome, within, row);
    let count = runs.len();
    let all = (0, count.checked_sub(1)?);
    let spans = (0..count).flat_map(|i| {
        let runs = &runs;
        (i..count)
            .take_while(move |&j| ((runs[j].1 - runs[i].0) as u64) < row)
            .map(move |j| (i, j))
    });
    let mut sums = Sums::default();
    for (i, j) in std::iter::once(all)
        .chain(spans.filter(|&c| c != all))
        .take(MAX_CANDIDATES)
    {
        let mut header: [u8; OBJ_HEADER as usize] =
            current[..OBJ_HEADER as usize].try_into().ok()?;
        for &(start, end) in runs[i..=j].iter().take_while(|r| r.0 < OBJ_HEADER as usize) {
            for b in start..end.min(OBJ_HEADER as usize) {
                header[b] ^= syndrome[b];
            }
        }
        let decoded = Header::decode(&header);
        if decoded.size > current.len() as u64 - OBJ_HEADER {
            continue;
        }
        let n = 12 + decoded.size;
        let terms = sums.for_length(n, current, syndrome, &runs);
        let (a, b) = terms.candidate(n, i, j);
        if (b << 16 | a) as u32 == decoded.sum {
            let mut repaired = current.to_vec();
            for &(start, end) in &runs[i..=j] {
                for b in start..end {
                    repaired[b] ^= syndrome[b];
                }
            }
            return Some(repaired);
        }
    }
    None
}

/// Bytes of consistent columns a run spans: repairing them changes nothing, and a scribble
/// that equals some of the bytes it overwrites still makes one run.
const GAP: usize = 64;

/// Runs of inconsistent bytes, joined across gaps shorter than [`GAP`], split where a row
/// ends (where a damaged page meets the same columns of the next row).
fn runs(syndrome: &[u8], within: u64, row: u64) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, _) in syndrome.iter().enumerate().filter(|(_, &s)| s != 0) {
        let row_start = (within + i as u64).is_multiple_of(row);
        match runs.last_mut() {
            Some(run) if i - run.1 < GAP && !row_start && !crosses(run.1, i, within, row) => {
                run.1 = i + 1
            }
            _ => runs.push((i, i + 1)),
        }
    }
    runs
}

/// Whether a row starts in `from..=to` (object indices).
fn crosses(from: usize, to: usize, within: u64, row: u64) -> bool {
    (within + from as u64) / row != (within + to as u64) / row
}

/// Per stream length: the unrepaired stream's A and B, and prefix sums over the runs of
/// each repair's change Σδ and Σpos·δ.
#[derive(Default)]
struct Sums(HashMap<u64, Terms>);

struct Terms {
    a: u64,
    b: u64,
    delta: Vec<u64>,
    weighted: Vec<u64>,
}

impl Sums {
    fn for_length(
        &mut self,
        n: u64,
        current: &[u8],
        syndrome: &[u8],
        runs: &[(usize, usize)],
    ) -> &Terms {
        self.0.entry(n).or_insert_with(|| {
            let in_stream = |b: usize| stream_pos(b).filter(|&p| p < n);
            let (mut a, mut b) = (1, n % MOD);
            for (byte, &d) in current.iter().enumerate() {
                if let Some(p) = in_stream(byte) {
                    a = (a + u64::from(d)) % MOD;
                    b = (b + (n - p) % MOD * u64::from(d)) % MOD;
                }
            }
            let (mut delta, mut weighted) = (vec![0], vec![0]);
            for &(start, end) in runs {
                let (mut s1, mut s2) = (0, 0);
                for byte in start..end {
                    if let Some(p) = in_stream(byte) {
                        let new = u64::from(current[byte] ^ syndrome[byte]);
                        let d = (new + MOD - u64::from(current[byte])) % MOD;
                        s1 = (s1 + d) % MOD;
                        s2 = (s2 + p % MOD * d) % MOD;
                    }
                }
                delta.push((delta.last().expect("seeded") + s1) % MOD);
                weighted.push((weighted.last().expect("seeded") + s2) % MOD);
            }
            Terms {
                a,
                b,
                delta,
                weighted,
            }
        })
    }
}

impl Terms {
    /// A and B of the stream of length `n` with runs `i..=j` repaired.
    fn candidate(&self, n: u64, i: usize, j: usize) -> (u64, u64) {
        let s1 = (self.delta[j + 1] + MOD - self.delta[i]) % MOD;
        let s2 = (self.weighted[j + 1] + MOD - self.weighted[i]) % MOD;
        let a = (self.a + s1) % MOD;
        let b = (self.b + n % MOD * s1 % MOD + MOD - s2) % MOD;
        (a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(data: &[u8]) -> Vec<u8> {
        let mut bytes = crate::pool::encode_object(4, data);
        bytes.resize(bytes.len() + 40, 0);
        bytes
    }

    #[test]
    fn the_damaged_span_is_told_from_other_rows_damage() {
        let good = object(&(0..500).map(|i| (i * 7 % 253) as u8).collect::<Vec<_>>());
        let mut damaged = good.clone();
        let mut syndrome = vec![0; good.len()];
        // This object's bytes 100..180 were scribbled; bytes 300..350 share their columns
        // with a scribble in another row, and the header and padding are inconsistent too.
        for b in 100..180 {
            damaged[b] ^= 0x5a;
            syndrome[b] = 0x5a;
        }
        for b in (300..350).chain(2..6).chain(good.len() - 10..good.len()) {
            syndrome[b] = 0x33;
        }
        assert_eq!(find(&damaged, &syndrome, 0, 4096), Some(good.clone()));
        assert_eq!(
            find(&damaged, &vec![0; good.len()], 0, 4096),
            None,
            "nothing to rebuild"
        );
        let mut header_hit = good.clone();
        header_hit[0] ^= 0x20; // a larger size
        let mut syndrome = vec![0; good.len()];
        syndrome[0] = 0x20;
        assert_eq!(find(&header_hit, &syndrome, 0, 4096), Some(good.clone()));
        // A row ends inside the object: a lost page ending there is told from the same
        // columns of the next row, though no consistent byte lies between.
        let mut syndrome = vec![0; good.len()];
        let mut damaged = good.clone();
        for b in 0..good.len() {
            syndrome[b] = 0x11;
            if b < 300 {
                damaged[b] ^= 0x11;
            }
        }
        assert_eq!(find(&damaged, &syndrome, 4096 - 300, 4096), Some(good));
    }

    #[test]
    fn runs_join_short_gaps_and_split_at_rows() {
        let mut syndrome = vec![0u8; 400];
        for b in (10..20).chain(50..60).chain(200..210).chain(250..260) {
            syndrome[b] = 1;
        }
        assert_eq!(runs(&syndrome, 0, 4096), [(10, 60), (200, 260)]);
        assert_eq!(
            runs(&syndrome, 4096 - 205, 4096),
            [(10, 60), (200, 205), (205, 260)]
        );
    }
}
