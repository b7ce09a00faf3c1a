//! Units: the pieces of a store that the hardware writes atomically.

/// Size of a naturally aligned word: the largest piece written atomically.
pub const WORD: u64 = 8;
/// Size of a cache line.
pub const LINE: u64 = 64;

/// The part of one store that falls into one aligned 8-byte word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub addr: u64,
    len: u8,
    bytes: [u8; WORD as usize],
    pub nt: bool,
    /// Index of the trace entry that stored it.
    pub entry: u64,
    /// Position in the global store order (program order: one CPU).
    pub seq: u64,
}

impl Unit {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn line(&self) -> u64 {
        self.addr & !(LINE - 1)
    }
}

/// Splits a store at word boundaries, in ascending address order, numbering the units
/// from `first_seq` on.
pub fn split_store(
    addr: u64,
    data: &[u8],
    nt: bool,
    entry: u64,
    first_seq: u64,
) -> impl Iterator<Item = Unit> + '_ {
    let mut offset = 0usize;
    let mut seq = first_seq;
    std::iter::from_fn(move || {
        if offset >= data.len() {
            return None;
        }
        let at = addr + offset as u64;
        let room = (WORD - at % WORD) as usize;
        let len = room.min(data.len() - offset);
        let mut bytes = [0u8; WORD as usize];
        bytes[..len].copy_from_slice(&data[offset..offset + len]);
        offset += len;
        seq += 1;
        Some(Unit {
            addr: at,
            len: len as u8,
            bytes,
            nt,
            entry,
            seq: seq - 1,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_unaligned_store_at_words() {
        let data: Vec<u8> = (1..=12).collect();
        let units: Vec<Unit> = split_store(0x3d, &data, true, 7, 100).collect();
        let pieces: Vec<(u64, &[u8])> = units.iter().map(|u| (u.addr, u.bytes())).collect();
        assert_eq!(
            pieces,
            vec![
                (0x3d, &data[0..3]),
                (0x40, &data[3..11]),
                (0x48, &data[11..12])
            ]
        );
        assert_eq!(units[0].line(), 0);
        assert_eq!(units[1].line(), 0x40);
        assert!(units.iter().all(|u| u.nt && u.entry == 7));
        assert_eq!(
            units.iter().map(|u| u.seq).collect::<Vec<_>>(),
            vec![100, 101, 102]
        );
    }
}
