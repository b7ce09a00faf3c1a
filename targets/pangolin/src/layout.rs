//! Where things are in a pool: the replicated pool metadata, the two redo-log copies, and
//! zones of chunk rows whose last row is the parity of the others.
//!
//! ```text
//! | meta | meta' | lane 0: log, log' | lane 1 ... | zone 0: row 0 .. row R-2, parity row | zone 1 ... |
//! ```
//!
//! A lane is a redo log (two copies) that one committing thread holds at a time.
//!
//! A zone's data rows hold objects, allocated in 64-byte units; its first object is the
//! zone's allocation bitmap. Byte `k` of the parity row is the XOR of byte `k` of every
//! data row, so each 4 KiB page column tolerates the loss of one of its pages.

use crate::checksum;
use crate::error::OpenError;

/// The unit of loss that parity repairs (a poisoned page).
pub const PAGE: u64 = 4096;
/// A cache line: the unit every store to PM covers.
pub const LINE: u64 = 64;
/// The allocation unit: objects start on a line.
pub const UNIT: u64 = LINE;
/// Bytes of an object's header: size, type, checksum, reserved (all `u32`).
pub const OBJ_HEADER: u64 = 16;
/// The format this library writes and reads.
pub const FORMAT_VERSION: u32 = 5;
/// The largest pool and log copy: a log entry holds a 40-bit offset and a 24-bit length.
const MAX_POOL: u64 = 1 << 40;
const MAX_LOG: u64 = 1 << 24;
/// The most log lanes (each thread committing at once holds one).
const MAX_LANES: u64 = 64;
const MAGIC: u64 = u64::from_le_bytes(*b"PANGOLIN");
/// Encoded metadata: magic, version, lanes, pool length, chunk size, rows, log size, root
/// object, checksum.
const META_LEN: usize = 60;

/// The shape of a pool, chosen at format time and read back from its metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of the pool.
    pub pool_len: u64,
    /// Bytes of a chunk row, a multiple of [`PAGE`].
    pub chunk_size: u64,
    /// Rows of a full zone, its parity row included (at least 2).
    pub rows: u64,
    /// Bytes of each of the two redo-log copies of a lane, a multiple of [`PAGE`].
    pub log_size: u64,
    /// Log lanes: how many threads can commit at once (at least 1).
    pub lanes: u64,
}

impl Geometry {
    /// 256 KiB chunks, 100 rows a zone (parity: 1 % of the zones), 4 lanes of 256 KiB
    /// log copies.
    pub fn new(pool_len: u64) -> Self {
        Geometry {
            pool_len,
            chunk_size: 256 << 10,
            rows: 100,
            log_size: 256 << 10,
            lanes: 4,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), OpenError> {
        let bad = self.chunk_size == 0
            || !self.chunk_size.is_multiple_of(PAGE)
            || self.rows < 2
            || self.log_size < PAGE
            || !self.log_size.is_multiple_of(PAGE)
            || self.log_size > MAX_LOG
            || !(1..=MAX_LANES).contains(&self.lanes)
            || self.pool_len > MAX_POOL;
        if bad {
            return Err(OpenError::BadGeometry(*self));
        }
        if self.zone_count() == 0 {
            return Err(OpenError::TooSmall(*self));
        }
        Ok(())
    }

    pub fn log_offset(&self, lane: usize, copy: usize) -> u64 {
        2 * PAGE + (2 * lane + copy) as u64 * self.log_size
    }

    pub(crate) fn zones_start(&self) -> u64 {
        2 * PAGE + 2 * self.lanes * self.log_size
    }

    pub(crate) fn zone_size(&self) -> u64 {
        self.rows * self.chunk_size
    }

    /// Full zones, then a last one of the rows that fit, if at least two do.
    pub fn zone_count(&self) -> usize {
        let room = self.pool_len.saturating_sub(self.zones_start());
        let full = room / self.zone_size();
        let rest = room % self.zone_size() / self.chunk_size;
        (full + u64::from(rest >= 2)) as usize
    }

    pub fn zone(&self, index: usize) -> Zone {
        let base = self.zones_start() + index as u64 * self.zone_size();
        let rows = self.rows.min((self.pool_len - base) / self.chunk_size);
        Zone {
            base,
            rows,
            chunk: self.chunk_size,
        }
    }

    /// The zone holding pool offset `at`, if any.
    #[inline]
    pub fn zone_of(&self, at: u64) -> Option<(usize, Zone)> {
        // As `zone_count` and `zone` decide, without their divisions: every read asks.
        let index = at.checked_sub(self.zones_start())? / self.zone_size();
        let base = self.zones_start() + index * self.zone_size();
        let rows = self
            .rows
            .min(self.pool_len.checked_sub(base)? / self.chunk_size);
        let zone = Zone {
            base,
            rows,
            chunk: self.chunk_size,
        };
        (rows >= 2 && at < base + rows * zone.chunk).then_some((usize::try_from(index).ok()?, zone))
    }

    /// Bytes of parity and replicas over the pool's length.
    pub fn redundancy(&self) -> f64 {
        let parity: u64 = (0..self.zone_count()).map(|z| self.zone(z).chunk).sum();
        (parity + PAGE + self.lanes * self.log_size) as f64 / self.pool_len as f64
    }
}

/// One zone: `rows - 1` data rows, then the parity row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone {
    pub base: u64,
    pub rows: u64,
    pub chunk: u64,
}

impl Zone {
    pub fn data_len(&self) -> u64 {
        (self.rows - 1) * self.chunk
    }

    pub fn parity_base(&self) -> u64 {
        self.base + self.data_len()
    }

    pub fn is_data(&self, at: u64) -> bool {
        (self.base..self.parity_base()).contains(&at)
    }

    /// The parity byte covering data byte `at`, or `at` itself in the parity row.
    pub fn parity_of(&self, at: u64) -> u64 {
        self.parity_base() + (at - self.base) % self.chunk
    }

    /// Allocation units of the data rows.
    pub fn units(&self) -> u64 {
        self.data_len() / UNIT
    }

    /// Bytes of the bitmap object's data: an allocated bit and a first-unit bit per unit.
    pub fn bitmap_len(&self) -> u64 {
        2 * self.units().div_ceil(8)
    }

    /// Units the bitmap object itself takes, from unit 0.
    pub fn bitmap_units(&self) -> u64 {
        (OBJ_HEADER + self.bitmap_len()).div_ceil(UNIT)
    }
}

/// The pool metadata, kept in two checksummed copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub geometry: Geometry,
    /// The root object, allocated at format time.
    pub root: u64,
}

impl Meta {
    pub fn encode(&self) -> [u8; LINE as usize] {
        let g = &self.geometry;
        let mut line = [0; LINE as usize];
        line[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        line[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        line[12..16].copy_from_slice(&(g.lanes as u32).to_le_bytes());
        for (i, value) in [g.pool_len, g.chunk_size, g.rows, g.log_size, self.root]
            .into_iter()
            .enumerate()
        {
            line[16 + 8 * i..24 + 8 * i].copy_from_slice(&value.to_le_bytes());
        }
        let sum = checksum::full(&[&line[..META_LEN - 4]]);
        line[META_LEN - 4..META_LEN].copy_from_slice(&sum.to_le_bytes());
        line
    }

    /// The metadata in `line`, if its magic, version and checksum hold.
    pub fn decode(line: &[u8]) -> Result<Meta, OpenError> {
        let u64_at = |at: usize| u64::from_le_bytes(line[at..at + 8].try_into().expect("8"));
        if u64_at(0) != MAGIC {
            return Err(OpenError::NotFormatted);
        }
        let stored = u32::from_le_bytes(line[META_LEN - 4..META_LEN].try_into().expect("4"));
        if checksum::full(&[&line[..META_LEN - 4]]) != stored {
            return Err(OpenError::CorruptMetadata);
        }
        let version = u32::from_le_bytes(line[8..12].try_into().expect("4"));
        if version != FORMAT_VERSION {
            return Err(OpenError::OtherVersion(version));
        }
        Ok(Meta {
            geometry: Geometry {
                pool_len: u64_at(16),
                chunk_size: u64_at(24),
                rows: u64_at(32),
                log_size: u64_at(40),
                lanes: u64::from(u32::from_le_bytes(line[12..16].try_into().expect("4"))),
            },
            root: u64_at(48),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_parity_is_about_one_percent() {
        let g = Geometry::new(1 << 30);
        g.validate().unwrap();
        let parity = g.chunk_size as f64 / g.zone(0).data_len() as f64;
        assert!((0.0100..0.0102).contains(&parity), "{parity}");
        assert!(g.redundancy() < 0.013, "{}", g.redundancy());
    }

    #[test]
    fn a_geometry_whose_offsets_or_log_overflow_an_entry_header_is_refused() {
        let mut g = Geometry::new(MAX_POOL);
        g.log_size = MAX_LOG;
        g.validate().unwrap();
        for bad in [
            Geometry {
                pool_len: MAX_POOL + PAGE,
                ..g
            },
            Geometry {
                log_size: MAX_LOG + PAGE,
                ..g
            },
        ] {
            assert_eq!(bad.validate(), Err(OpenError::BadGeometry(bad)));
        }
    }

    #[test]
    fn zones_tile_the_pool_and_a_short_last_zone_keeps_its_parity_row() {
        let g = Geometry {
            pool_len: 2 * PAGE + 2 * PAGE + 4 * PAGE + 3 * PAGE,
            chunk_size: PAGE,
            rows: 4,
            log_size: PAGE,
            lanes: 1,
        };
        assert_eq!(g.zone_count(), 2);
        let last = g.zone(1);
        assert_eq!((last.rows, last.parity_base() + PAGE), (3, g.pool_len));
        assert_eq!(g.zone_of(last.base + 5).map(|z| z.0), Some(1));
        assert_eq!(g.zone_of(3 * PAGE), None);
        assert_eq!(
            last.parity_of(last.base + PAGE + 70),
            last.parity_base() + 70
        );
    }

    #[test]
    fn metadata_round_trips_and_any_flip_is_refused() {
        let meta = Meta {
            geometry: Geometry::new(1 << 30),
            root: 12345,
        };
        let line = meta.encode();
        assert_eq!(Meta::decode(&line), Ok(meta));
        for byte in 0..META_LEN {
            let mut flipped = line;
            flipped[byte] ^= 4;
            assert!(Meta::decode(&flipped).is_err(), "byte {byte}");
        }
    }
}
