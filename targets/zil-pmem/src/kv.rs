//! A small consumer of the log: a key-value map in a file (the stand-in for a pool on an
//! NVMe SSD) committed every N puts as a txg, with each put made durable earlier by
//! logging it. Recovery is the last committed txg plus the claimed log.
//!
//! ```text
//! file:    [commit slot 0, 4096 bytes][commit slot 1][data records...]
//! commit:  magic, txg, end of the data it covers, log header, CRC32C   (slot = txg % 2)
//! record:  key length (u32), value length (u32), key, value
//! ```
//!
//! A txg commit writes the txg's records after the data, flushes, writes the commit record
//! into the slot the previous commit does not use, and flushes again.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use persim_ringbuf::{PmAccess, Region};

use crate::error::{AppendError, OpenError, ReplayError};
use crate::header::{LogHeader, LOG_HEADER_LEN};
use crate::layout::Position;
use crate::log::{ZilPmem, DEFAULT_COMMITTERS};

const SLOT: u64 = 4096;
const DATA_START: u64 = 2 * SLOT;
const MAGIC: [u8; 8] = *b"ZILKVTXG";
const COMMIT_LEN: usize = 24 + LOG_HEADER_LEN;
/// The object set every put is logged for.
const OBJSET: u64 = 1;

/// Recovering or using the store failed.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("the store file: {0}")]
    Io(#[from] io::Error),
    #[error("the store file has no valid commit record: it is not a store, or damaged")]
    NoCommit,
    #[error("the store's data is damaged at offset {0}")]
    CorruptData(u64),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    Replay(#[from] ReplayError<io::Error>),
    #[error("replay stopped after {0} entries, as asked (a simulated crash)")]
    Interrupted(usize),
}

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The last txg committed before the crash.
    pub committed_txg: u64,
    /// The log entries applied, in order.
    pub replayed: Vec<Position>,
    /// Whether an interrupted replay was resumed.
    pub resumed: bool,
    /// Chunks whose entries mix uses ([`crate::Claim::mixed_chunks`]).
    pub mixed_chunks: Vec<usize>,
    /// Chunks that claim found holding entries: none once a recovery before this one
    /// finished, since its txg commit freed every chunk it claimed.
    pub chunks_in_use: usize,
}

/// The key-value store.
pub struct KvStore<R: Region, A: PmAccess> {
    file: File,
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Records of the open txg.
    pending: Vec<u8>,
    pending_puts: usize,
    every: usize,
    committed: u64,
    data_end: u64,
    header: LogHeader,
    log: ZilPmem<R, A>,
}

impl<R: Region, A: PmAccess> KvStore<R, A> {
    /// Creates an empty store in `path` and formats `region` as its log.
    pub fn create(
        path: &Path,
        region: R,
        access: A,
        chunk_size: usize,
        every: usize,
        guids: (u64, u64),
    ) -> Result<Self, KvError> {
        let mut log = ZilPmem::format(region, access, chunk_size, DEFAULT_COMMITTERS)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let header = LogHeader::new(guids.0, guids.1);
        let claim = log.claim(&header, 1).expect("a new log is claimed once");
        let header = log
            .replay(&claim, |_, _| Ok::<(), io::Error>(()))
            .map_err(|_| KvError::NoCommit)?;
        let mut store = KvStore {
            file,
            map: BTreeMap::new(),
            pending: Vec::new(),
            pending_puts: 0,
            every: every.max(1),
            committed: 0,
            data_end: DATA_START,
            header,
            log,
        };
        store.write_commit(0)?;
        Ok(store)
    }

    /// Recovers the store in `path` with its log in `region`: the last committed txg, then
    /// the log's entries of later txgs. With `stop_after`, replay fails after that many
    /// entries, as if the machine crashed there.
    pub fn recover(
        path: &Path,
        region: R,
        access: A,
        every: usize,
        stop_after: Option<usize>,
    ) -> Result<(Self, Recovery), KvError> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let (committed, data_end, header) = read_commit(&file)?;
        let mut store = KvStore {
            map: read_data(&file, data_end)?,
            file,
            pending: Vec::new(),
            pending_puts: 0,
            every: every.max(1),
            committed,
            data_end,
            header,
            log: ZilPmem::open(region, access, DEFAULT_COMMITTERS)?,
        };
        let mut recovery = Recovery {
            committed_txg: committed,
            resumed: header.state == crate::LogState::Replaying,
            ..Recovery::default()
        };
        let claim = store
            .log
            .claim(&header, committed + 1)
            .expect("claimed once after open");
        recovery.mixed_chunks = claim.mixed_chunks();
        recovery.chunks_in_use = store.log.geometry().chunk_count - store.log.free_chunks();
        let KvStore {
            file,
            map,
            committed,
            data_end,
            log,
            ..
        } = &mut store;
        let replay = log.replay(&claim, |entry, header| {
            if stop_after == Some(recovery.replayed.len()) {
                return Err(io::Error::other("interrupted"));
            }
            let (key, value) = decode_put(entry.body)
                .ok_or_else(|| io::Error::other("a logged body is no put"))?;
            let record = encode_put(key, value);
            file.write_all_at(&record, *data_end)?;
            *data_end += record.len() as u64;
            *committed += 1;
            commit(file, *committed, *data_end, header)?;
            map.insert(key.to_vec(), value.to_vec());
            recovery.replayed.push(entry.position);
            Ok(())
        });
        store.header = match replay {
            Ok(header) => header,
            Err(ReplayError::Consumer { .. }) if stop_after.is_some() => {
                return Err(KvError::Interrupted(recovery.replayed.len()))
            }
            Err(e) => return Err(e.into()),
        };
        // Later txgs than any entry claimed, so that a replayed entry is never kept again.
        let txg = (store.committed + 1).max(claim.max_txg);
        store.write_commit(txg)?;
        Ok((store, recovery))
    }

    /// Stores `value` under `key` durably: logged now, committed with its txg later.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        let record = encode_put(key, value);
        let logged = match self.log.append(OBJSET, self.committed + 1, &record, true) {
            Ok(_) => true,
            // No room in the log: the txg commit makes the put durable instead.
            Err(AppendError::LogFull | AppendError::TooLarge { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        self.pending.extend_from_slice(&record);
        self.pending_puts += 1;
        self.map.insert(key.to_vec(), value.to_vec());
        if !logged || self.pending_puts >= self.every {
            self.commit_txg()?;
        }
        Ok(())
    }

    /// Commits the open txg: its records, then the commit record; frees the log's chunks.
    pub fn commit_txg(&mut self) -> Result<(), KvError> {
        self.file.write_all_at(&self.pending, self.data_end)?;
        self.data_end += self.pending.len() as u64;
        self.pending.clear();
        self.pending_puts = 0;
        self.write_commit(self.committed + 1)
    }

    fn write_commit(&mut self, txg: u64) -> Result<(), KvError> {
        commit(&self.file, txg, self.data_end, &self.header)?;
        self.committed = txg;
        self.log.txg_synced(txg);
        Ok(())
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.map.get(key).map(Vec::as_slice)
    }

    pub fn map(&self) -> &BTreeMap<Vec<u8>, Vec<u8>> {
        &self.map
    }

    pub fn committed_txg(&self) -> u64 {
        self.committed
    }

    /// Drops the store without committing (a crash, for the log) and gives the region back.
    pub fn crash(self) -> R {
        self.log.into_region()
    }

    /// Drops the store as [`KvStore::crash`] does and gives the region and its access
    /// back, to recover again.
    pub fn stop(self) -> (R, A) {
        self.log.into_parts()
    }
}

/// Flushes the data, then writes and flushes the commit record of `txg`.
fn commit(file: &File, txg: u64, data_end: u64, header: &LogHeader) -> io::Result<()> {
    file.sync_data()?;
    let mut record = [0u8; COMMIT_LEN + 4];
    record[0..8].copy_from_slice(&MAGIC);
    record[8..16].copy_from_slice(&txg.to_le_bytes());
    record[16..24].copy_from_slice(&data_end.to_le_bytes());
    record[24..COMMIT_LEN].copy_from_slice(&header.encode());
    let crc = crc32c::crc32c(&record[..COMMIT_LEN]);
    record[COMMIT_LEN..].copy_from_slice(&crc.to_le_bytes());
    file.write_all_at(&record, (txg % 2) * SLOT)?;
    file.sync_data()
}

/// The newest valid commit record: (txg, data end, log header).
fn read_commit(file: &File) -> Result<(u64, u64, LogHeader), KvError> {
    let mut best = None;
    for slot in 0..2 {
        let mut record = [0u8; COMMIT_LEN + 4];
        if file.read_exact_at(&mut record, slot * SLOT).is_err() {
            continue;
        }
        let crc = u32::from_le_bytes(record[COMMIT_LEN..].try_into().expect("4"));
        if record[0..8] != MAGIC || crc != crc32c::crc32c(&record[..COMMIT_LEN]) {
            continue;
        }
        let txg = u64::from_le_bytes(record[8..16].try_into().expect("8"));
        let end = u64::from_le_bytes(record[16..24].try_into().expect("8"));
        let header = record[24..COMMIT_LEN].try_into().expect("header bytes");
        let Some(header) = LogHeader::decode(header) else {
            continue;
        };
        if best.is_none_or(|(t, _, _)| txg > t) {
            best = Some((txg, end, header));
        }
    }
    best.ok_or(KvError::NoCommit)
}

fn read_data(file: &File, end: u64) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, KvError> {
    let mut data = vec![0; (end - DATA_START) as usize];
    file.read_exact_at(&mut data, DATA_START)?;
    let mut map = BTreeMap::new();
    let mut rest = &data[..];
    while !rest.is_empty() {
        let at = end - rest.len() as u64;
        let (key, value) = decode_put(rest).ok_or(KvError::CorruptData(at))?;
        rest = &rest[8 + key.len() + value.len()..];
        map.insert(key.to_vec(), value.to_vec());
    }
    Ok(map)
}

fn encode_put(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + key.len() + value.len());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

/// The first put in `bytes` (which may hold more).
fn decode_put(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let key_len = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?) as usize;
    let value_len = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?) as usize;
    let key = bytes.get(8..8 + key_len)?;
    let value = bytes.get(8 + key_len..8 + key_len + value_len)?;
    Some((key, value))
}
