//! Media faults and scribbles (docs/guides/faults.md): what corrupting a range of a PM image
//! means (`FaultKind`), where a fault lands (`Fault`), and a seeded plan of distinct
//! faults over the bytes chosen for them (`plan_faults`). No VM: the tester recovers the
//! corrupted images, and the ring buffer's tests corrupt their regions in process.

use crate::Image;
use persim_model::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

/// The unit of a lost page: QEMU's NVDIMM has no poison, so a zeroed page stands for one.
pub const PAGE: u64 = 4096;

/// How a fault corrupts the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FaultKind {
    /// One bit inverted (a media bit error).
    BitFlip,
    /// N bytes overwritten with random bytes (a stray write of buggy code).
    Scribble(u64),
    /// N bytes zeroed (an erased range).
    Zero(u64),
    /// The aligned 4 KiB page around the chosen byte zeroed (a lost page).
    Page,
}

impl FaultKind {
    /// How many bytes it corrupts.
    pub fn len(self) -> u64 {
        match self {
            FaultKind::BitFlip => 1,
            FaultKind::Scribble(n) | FaultKind::Zero(n) => n,
            FaultKind::Page => PAGE,
        }
    }

    /// Whether it corrupts nothing (a zero-length scribble or zeroing; refused when parsed).
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            FaultKind::BitFlip => write!(f, "bitflip"),
            FaultKind::Scribble(n) => write!(f, "scribble:{n}"),
            FaultKind::Zero(n) => write!(f, "zero:{n}"),
            FaultKind::Page => write!(f, "page"),
        }
    }
}

/// A fault kind that is not one of `bitflip`, `scribble:N`, `zero:N`, `page`.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown fault kind `{0}`: give bitflip, scribble:N or zero:N (N bytes, 1 to {PAGE}; \
     e.g. scribble:64), or page (a zeroed 4 KiB page)"
)]
pub struct UnknownFaultKind(String);

impl FromStr for FaultKind {
    type Err = UnknownFaultKind;

    fn from_str(text: &str) -> Result<FaultKind, UnknownFaultKind> {
        let bytes = |n: &str| {
            n.parse::<u64>()
                .ok()
                .filter(|n| (1..=PAGE).contains(n))
                .ok_or_else(|| UnknownFaultKind(text.to_owned()))
        };
        match text.split_once(':') {
            None if text == "bitflip" => Ok(FaultKind::BitFlip),
            None if text == "page" => Ok(FaultKind::Page),
            Some(("scribble", n)) => Ok(FaultKind::Scribble(bytes(n)?)),
            Some(("zero", n)) => Ok(FaultKind::Zero(bytes(n)?)),
            _ => Err(UnknownFaultKind(text.to_owned())),
        }
    }
}

impl From<FaultKind> for String {
    fn from(kind: FaultKind) -> String {
        kind.to_string()
    }
}

impl TryFrom<String> for FaultKind {
    type Error = UnknownFaultKind;

    fn try_from(text: String) -> Result<FaultKind, UnknownFaultKind> {
        text.parse()
    }
}

/// One fault: its kind, where it starts in the image, and the draw that fixes its bytes
/// (the bit a flip inverts, the seed of a scribble's bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    pub offset: u64,
    pub draw: u64,
}

impl Fault {
    /// The bytes it corrupts in an image of `len` bytes (cut at its end).
    pub fn range(&self, len: u64) -> Range<u64> {
        self.offset..(self.offset + self.kind.len()).min(len)
    }

    /// Corrupts `bytes`, the image's bytes of [`Fault::range`].
    pub fn corrupt(&self, bytes: &mut [u8]) {
        match self.kind {
            FaultKind::BitFlip => bytes[0] ^= 1 << (self.draw % 8),
            FaultKind::Scribble(_) => {
                let mut rng = SplitMix64(self.draw);
                for chunk in bytes.chunks_mut(8) {
                    let random = rng.next_u64().to_le_bytes();
                    chunk.copy_from_slice(&random[..chunk.len()]);
                }
            }
            FaultKind::Zero(_) | FaultKind::Page => bytes.fill(0),
        }
    }

    /// The image with this fault.
    pub fn apply(&self, image: &Image) -> Image {
        let range = self.range(image.len());
        let mut bytes = vec![0; (range.end - range.start) as usize];
        image.read(range.start, &mut bytes);
        self.corrupt(&mut bytes);
        let mut faulted = image.clone();
        faulted.write(range.start, &bytes);
        faulted
    }
}

/// Up to `count` distinct faults of `kind`, each starting at a byte drawn uniformly from
/// `targets` (disjoint ranges of an image of `len` bytes; a page fault covers the page of
/// that byte), fully determined by `seed`. Fewer when the targets hold fewer distinct
/// faults (e.g. every bit of a small range).
pub fn plan_faults(
    kind: FaultKind,
    targets: &[Range<u64>],
    len: u64,
    count: usize,
    seed: u64,
) -> Vec<Fault> {
    let total: u64 = targets.iter().map(|r| r.end - r.start).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut rng = SplitMix64(seed);
    let mut planned = BTreeSet::new();
    let mut faults = Vec::new();
    // Draws that repeat a fault are retried, up to a bound: small targets run out.
    for _ in 0..count.saturating_mul(16).max(64) {
        if faults.len() == count {
            break;
        }
        let byte = nth_byte(targets, rng.below(total));
        let offset = match kind {
            FaultKind::Page => byte - byte % PAGE,
            _ => byte,
        };
        let draw = match kind {
            FaultKind::BitFlip => rng.below(8),
            FaultKind::Scribble(_) => rng.next_u64(),
            FaultKind::Zero(_) | FaultKind::Page => 0,
        };
        let fault = Fault { kind, offset, draw };
        if offset < len && planned.insert(fault) {
            faults.push(fault);
        }
    }
    faults
}

/// The `n`th byte of the ranges, counted across them in order.
fn nth_byte(targets: &[Range<u64>], mut n: u64) -> u64 {
    for range in targets {
        let len = range.end - range.start;
        if n < len {
            return range.start + n;
        }
        n -= len;
    }
    unreachable!("n is below the ranges' total length")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print_alike_and_bad_ones_say_what_to_give() {
        for text in ["bitflip", "scribble:64", "zero:512", "page"] {
            assert_eq!(text.parse::<FaultKind>().unwrap().to_string(), text);
        }
        assert_eq!("zero:8".parse::<FaultKind>().unwrap().len(), 8);
        assert_eq!(FaultKind::Page.len(), PAGE);
        for bad in [
            "flip",
            "scribble",
            "scribble:0",
            "zero:4097",
            "zero:x",
            "page:2",
        ] {
            let e = bad.parse::<FaultKind>().unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("scribble:N"), "{e}");
        }
    }

    #[test]
    fn plans_are_seeded_distinct_and_inside_the_targets() {
        let targets = [100..200, 5000..5004];
        let a = plan_faults(FaultKind::Scribble(16), &targets, 1 << 20, 50, 7);
        assert_eq!(
            a,
            plan_faults(FaultKind::Scribble(16), &targets, 1 << 20, 50, 7)
        );
        assert_ne!(
            a,
            plan_faults(FaultKind::Scribble(16), &targets, 1 << 20, 50, 8)
        );
        assert_eq!(a.len(), 50);
        assert_eq!(a.iter().collect::<BTreeSet<_>>().len(), 50);
        assert!(a
            .iter()
            .all(|f| targets.iter().any(|t| t.contains(&f.offset))));
    }

    /// One target range.
    fn one(range: Range<u64>) -> Vec<Range<u64>> {
        vec![range]
    }

    #[test]
    fn a_small_target_gives_at_most_its_distinct_faults() {
        // 2 bytes hold 16 distinct bit flips; zeroing them can start at 2 places.
        let flips = plan_faults(FaultKind::BitFlip, &one(10..12), 64, 100, 1);
        assert_eq!(flips.len(), 16);
        assert_eq!(
            plan_faults(FaultKind::Zero(4), &one(10..12), 64, 100, 1).len(),
            2
        );
        let pages = plan_faults(FaultKind::Page, &one(5000..9000), 1 << 16, 10, 1);
        let starts: BTreeSet<u64> = pages.iter().map(|f| f.offset).collect();
        assert_eq!(starts, BTreeSet::from([4096, 8192]));
        assert!(plan_faults(FaultKind::BitFlip, &[], 64, 10, 1).is_empty());
    }

    #[test]
    fn faults_corrupt_exactly_their_range() {
        let mut image = Image::zeroed(1 << 16);
        image.write(0, &[0xff; 1 << 13]);
        let flip = Fault {
            kind: FaultKind::BitFlip,
            offset: 10,
            draw: 3,
        };
        let mut byte = [0; 1];
        flip.apply(&image).read(10, &mut byte);
        assert_eq!(byte, [0xf7]);
        let page = Fault {
            kind: FaultKind::Page,
            offset: 4096,
            draw: 0,
        };
        let faulted = page.apply(&image);
        let mut bytes = vec![0; 1 << 13];
        faulted.read(0, &mut bytes);
        assert!(bytes[..4096].iter().all(|&b| b == 0xff));
        assert!(bytes[4096..].iter().all(|&b| b == 0));
        // A scribble at the end is cut there; its bytes come from its draw.
        let scribble = Fault {
            kind: FaultKind::Scribble(64),
            offset: (1 << 16) - 4,
            draw: 9,
        };
        assert_eq!(scribble.range(1 << 16), (1 << 16) - 4..1 << 16);
        assert_ne!(scribble.apply(&image).hash(), image.hash());
        assert_eq!(scribble.apply(&image).hash(), scribble.apply(&image).hash());
    }
}
