//! Zone parity: byte `k` of a zone's parity row is the XOR of byte `k` of its data rows.

use persim_ringbuf::{PmAccess, Region};

use crate::layout::{Zone, LINE, PAGE};
use crate::pm::{Line, Pm};

/// The XOR of the line at `within` (an offset inside a row) of every row but `skip`.
fn xor_rows<R: Region, A: PmAccess>(
    pm: &Pm<R, A>,
    zone: &Zone,
    within: u64,
    len: u64,
    skip: Option<u64>,
) -> Vec<u8> {
    let mut out = vec![0; len as usize];
    for row in (0..zone.rows).filter(|&row| Some(row) != skip) {
        let bytes = pm.bytes(zone.base + row * zone.chunk + within, len);
        out.iter_mut().zip(bytes).for_each(|(o, b)| *o ^= b);
    }
    out
}

/// The parity line covering data line `at`, computed from the data rows.
pub fn recompute_line<R: Region, A: PmAccess>(pm: &Pm<R, A>, zone: &Zone, at: u64) -> (u64, Line) {
    let within = (at - zone.base) % zone.chunk / LINE * LINE;
    let line = xor_rows(pm, zone, within, LINE, Some(zone.rows - 1));
    (
        zone.parity_base() + within,
        line.try_into().expect("one line"),
    )
}

/// The page at `at` (data or parity row) as the other rows of its column say it should be.
pub fn rebuild_page<R: Region, A: PmAccess>(pm: &Pm<R, A>, zone: &Zone, at: u64) -> Vec<u8> {
    let rel = at - zone.base;
    xor_rows(
        pm,
        zone,
        rel % zone.chunk / PAGE * PAGE,
        PAGE,
        Some(rel / zone.chunk),
    )
}

/// The page columns of `zone` whose parity does not match their data.
pub fn inconsistent_columns<R: Region, A: PmAccess>(pm: &Pm<R, A>, zone: &Zone) -> Vec<u64> {
    (0..zone.chunk / PAGE)
        .filter(|&column| {
            xor_rows(pm, zone, column * PAGE, PAGE, None)
                .iter()
                .any(|&b| b != 0)
        })
        .collect()
}

/// The syndrome of bytes `at..at + len` of `zone` (which may cross rows): for each, the XOR
/// of its column's bytes in every row, parity included. Zero where the column is
/// consistent; where one row is damaged, the XOR that repairs it.
pub fn syndrome<R: Region, A: PmAccess>(pm: &Pm<R, A>, zone: &Zone, at: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len as usize);
    let mut x = at;
    while x < at + len {
        let within = (x - zone.base) % zone.chunk;
        let piece = (zone.chunk - within).min(at + len - x);
        out.extend(xor_rows(pm, zone, within, piece, None));
        x += piece;
    }
    out
}
