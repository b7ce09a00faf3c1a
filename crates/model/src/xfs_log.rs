//! XFS's log as a consistency mechanism (docs/design/model.md, "XFS log"): which stores
//! are log record headers and bodies, which metadata blocks a record logs (its buffer
//! log items), whether the log's ordering rules hold, and which dirty lines follow the
//! cut: the bodies of records.
//!
//! A record is a header sector (magic, cycle, body length, the CRC of header and body on
//! version 5) and its body, written as one bio. Recovery finds the head by the cycle
//! numbers stamped on every sector and checks the CRC of the last records: a record
//! partly durable is dropped, with what follows it, as if absent. So a pending body line
//! changes nothing but whether its record is whole, and the cut decides that while the
//! header lines stay explored.
//!
//! The rules: (1) no block a record logs is written in place before that record is
//! durable; (2) a record is written only once the records eight or more before it
//! (`XLOG_MAX_ICLOGS`, how far back recovery checks CRCs) are durable. A violation is
//! recorded with its witness, and from then on nothing is pruned.

use crate::jbd2::{JournalViolation, LogKind};
use crate::pending::PmPending;
use crate::rule_log::RuleLog;
use crate::unit::LINE;
use rustc_hash::FxHashMap;

const SECTOR: u64 = 512;
const HEADER_MAGIC: u32 = 0xfeed_babe;
/// Record header fields: h_version, h_len, h_lsn's block, h_cycle_data, h_size.
const H_VERSION: usize = 8;
const H_LEN: usize = 12;
const H_LSN_BLOCK: usize = 20;
const H_CYCLE_DATA: usize = 44;
const H_SIZE: usize = 320;
/// The header bytes that must be written before the record's extent is known.
const HEADER_KNOWN: usize = H_SIZE + 4;
const LOG_V2: u32 = 2;
/// Body bytes whose sectors' first words the first header sector saves.
const HEADER_CYCLE_SIZE: u64 = 32 * 1024;
/// Records that may be in flight at once: recovery checks the CRCs of this many.
const MAX_ICLOGS: usize = 8;
/// Operation header: tid, length, client, flags, padding.
const OP_HEADER: usize = 12;
const WAS_CONTINUED: u8 = 0x08;
const CLIENT_TRANSACTION: u8 = 0x69;
const CLIENT_LOG: u8 = 0xaa;
/// Log item types (host-endian, first half-word of an item's format region).
const ITEM_FIRST: u16 = 0x1236;
const ITEM_LAST: u16 = 0x12ff;
const ITEM_BUF: u16 = 0x123c;
/// A buffer log item that cancels the buffer: recovery does not replay it.
const BUF_CANCEL: u16 = 0x4;

/// Where XFS's internal log lies in PM, as the file system's superblock gives it
/// (`persim_image::xfs_log_layout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XfsLogLayout {
    /// PM offset of the data device's first byte (512-byte block 0).
    pub fs_start: u64,
    /// PM offset and length in bytes of the log.
    pub start: u64,
    pub len: u64,
}

impl XfsLogLayout {
    fn sector_of(&self, addr: u64) -> Option<u64> {
        (addr >= self.start && addr < self.start + self.len).then(|| (addr - self.start) / SECTOR)
    }

    fn sectors(&self) -> u64 {
        self.len / SECTOR
    }

    fn sector_addr(&self, sector: u64) -> u64 {
        self.start + sector % self.sectors() * SECTOR
    }
}

/// A record whose header is written.
#[derive(Debug)]
struct Record {
    /// Log sector of its header, sectors of header and of body.
    sector: u64,
    header_sectors: u64,
    body_sectors: u64,
    /// h_lsn's block number, to name it.
    block: u32,
    /// Its first header sector (the saved cycle words).
    header: Vec<u8>,
    /// Its body as written, until its items are read.
    body: Vec<u8>,
    /// PM ranges (start, end) of the blocks its buffer items log, once read.
    logged: Option<Vec<(u64, u64)>>,
}

impl Record {
    fn lines<'a>(&'a self, layout: &'a XfsLogLayout) -> impl Iterator<Item = u64> + 'a {
        (0..self.header_sectors + self.body_sectors).flat_map(move |s| {
            let at = layout.sector_addr(self.sector + s);
            (at..at + SECTOR).step_by(LINE as usize)
        })
    }
}

/// Follows one XFS log through a replay.
#[derive(Debug)]
pub struct XfsLog {
    layout: XfsLogLayout,
    /// A header sector being written: its log sector, bytes and bytes written so far.
    open: Option<(u64, Vec<u8>, usize)>,
    records: Vec<Record>,
    /// Per log sector: the last record written there, and whether it is a header sector.
    owner: FxHashMap<u64, (usize, bool)>,
    /// Records not yet durable.
    pending: Vec<usize>,
    rules: RuleLog,
}

impl XfsLog {
    pub fn new(layout: XfsLogLayout) -> XfsLog {
        XfsLog {
            layout,
            open: None,
            records: Vec::new(),
            owner: FxHashMap::default(),
            pending: Vec::new(),
            rules: RuleLog::new(LogKind::Xfs),
        }
    }

    pub fn holds_so_far(&self) -> bool {
        self.rules.holds()
    }

    pub fn take_violations(&mut self) -> Vec<JournalViolation> {
        self.rules.take()
    }

    /// A store of `data` at `addr` by entry `entry`, before the model takes it.
    pub fn store(&mut self, addr: u64, data: &[u8], entry: u64, pending: &PmPending) {
        let Some(sector) = self.layout.sector_of(addr) else {
            self.in_place(addr, data.len() as u64, entry);
            return;
        };
        let within = (addr % SECTOR) as usize;
        if within == 0 && data.len() >= 4 && be32(data, 0) == HEADER_MAGIC {
            self.open = Some((sector, vec![0; SECTOR as usize], 0));
        }
        if let Some((open, bytes, written)) = &mut self.open {
            if *open == sector {
                let end = (within + data.len()).min(bytes.len());
                bytes[within..end].copy_from_slice(&data[..end - within]);
                *written = (*written).max(end);
                if *written >= HEADER_KNOWN {
                    let (sector, bytes, _) = self.open.take().expect("open header");
                    self.header(sector, bytes, entry, pending);
                }
                return;
            }
        }
        self.body_store(sector, within, data);
    }

    /// A header sector whose extent fields are written: a new record owns its sectors.
    fn header(&mut self, sector: u64, bytes: Vec<u8>, entry: u64, pending: &PmPending) {
        let body_len = u64::from(be32(&bytes, H_LEN));
        let header_sectors = match be32(&bytes, H_VERSION) & LOG_V2 {
            0 => 1,
            _ => u64::from(be32(&bytes, H_SIZE))
                .div_ceil(HEADER_CYCLE_SIZE)
                .max(1),
        };
        let body_sectors = body_len.div_ceil(SECTOR);
        if header_sectors + body_sectors > self.layout.sectors() {
            return;
        }
        let index = self.records.len();
        for s in 0..header_sectors + body_sectors {
            let at = (sector + s) % self.layout.sectors();
            self.owner.insert(at, (index, s < header_sectors));
        }
        self.records.push(Record {
            sector,
            header_sectors,
            body_sectors,
            block: be32(&bytes, H_LSN_BLOCK),
            body: vec![0; (body_sectors * SECTOR) as usize],
            header: bytes,
            logged: None,
        });
        self.pending.push(index);
        let stale: Vec<usize> = self
            .pending
            .iter()
            .copied()
            .filter(|&r| r + MAX_ICLOGS <= index)
            .collect();
        // flagged once: it is no longer followed
        self.pending.retain(|r| !stale.contains(r));
        for r in stale {
            let layout = &self.layout;
            let lines = self.records[r]
                .lines(layout)
                .filter(|&l| pending.is_dirty(l))
                .collect();
            let block = u64::from(self.records[r].block);
            self.rules.broke(entry, 2, block, lines);
        }
    }

    fn body_store(&mut self, sector: u64, within: usize, data: &[u8]) {
        let Some(&(index, false)) = self.owner.get(&sector) else {
            return;
        };
        let sectors = self.layout.sectors();
        let record = &mut self.records[index];
        if record.logged.is_some() {
            return;
        }
        let first = (record.sector + record.header_sectors) % sectors;
        let at = ((sector + sectors - first) % sectors * SECTOR) as usize + within;
        let end = (at + data.len()).min(record.body.len());
        record.body[at..end].copy_from_slice(&data[..end - at]);
        // the bio writes the body in order: its last byte completes it
        if end == record.body.len() {
            self.read_items(index);
        }
    }

    /// Reads which blocks the record's buffer items log, from its body with each
    /// sector's first word restored from the header (the first 32 KiB: the rest of the
    /// saved words are in extended headers, not read).
    fn read_items(&mut self, index: usize) {
        let fs_start = self.layout.fs_start;
        let record = &mut self.records[index];
        let mut body = std::mem::take(&mut record.body);
        body.truncate(HEADER_CYCLE_SIZE as usize);
        for (i, sector) in body.chunks_mut(SECTOR as usize).enumerate() {
            let saved = H_CYCLE_DATA + 4 * i;
            sector[..4].copy_from_slice(&record.header[saved..saved + 4]);
        }
        record.logged = Some(buffer_items(&body, fs_start));
    }

    fn in_place(&mut self, addr: u64, len: u64, entry: u64) {
        let hit = self.pending.iter().copied().find(|&r| {
            self.records[r]
                .logged
                .as_ref()
                .is_some_and(|ranges| ranges.iter().any(|&(s, e)| addr < e && addr + len > s))
        });
        if let Some(record) = hit {
            let block = u64::from(self.records[record].block);
            self.rules.broke(entry, 1, block, vec![addr & !(LINE - 1)]);
        }
    }

    /// After a fence: records none of whose lines are pending are durable.
    pub fn fenced(&mut self, pending: &PmPending) {
        let layout = &self.layout;
        let records = &mut self.records;
        self.pending.retain(|&r| {
            let durable = !records[r].lines(layout).any(|l| pending.is_dirty(l));
            if durable {
                records[r].body = Vec::new();
            }
            !durable
        });
    }

    /// Whether `line`, dirty at a failure point, lies in the body of the last record
    /// written there: the cut decides whether that record is whole.
    pub fn protects(&self, line: u64) -> bool {
        self.layout
            .sector_of(line)
            .and_then(|s| self.owner.get(&s))
            .is_some_and(|&(_, header)| !header)
    }
}

/// The PM ranges of the blocks that the buffer log items of a record body log (not the
/// cancelled ones). Items are counted region by region: an item's format region says
/// how many regions it has; a region continued from the previous record is skipped.
fn buffer_items(body: &[u8], fs_start: u64) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    let mut at = 0;
    let mut skip = 0u16;
    while at + OP_HEADER <= body.len() {
        let len = be32(body, at + 4) as usize;
        let (client, flags) = (body[at + 8], body[at + 9]);
        if !matches!(client, CLIENT_TRANSACTION | CLIENT_LOG) {
            break;
        }
        let region = &body[at + OP_HEADER..(at + OP_HEADER + len).min(body.len())];
        at += OP_HEADER + len;
        if len == 0 || flags & WAS_CONTINUED != 0 {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if region.len() < 16 {
            continue;
        }
        let kind = le16(region, 0);
        if !(ITEM_FIRST..=ITEM_LAST).contains(&kind) {
            continue;
        }
        skip = le16(region, 2).saturating_sub(1);
        if kind == ITEM_BUF && le16(region, 4) & BUF_CANCEL == 0 {
            let blocks = u64::from(le16(region, 6));
            let daddr = u64::from_le_bytes(region[8..16].try_into().expect("eight bytes"));
            let start = fs_start.saturating_add(daddr.saturating_mul(SECTOR));
            ranges.push((start, start.saturating_add(blocks * SECTOR)));
        }
    }
    ranges
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn le16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}
