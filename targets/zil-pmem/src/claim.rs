//! Claim and replay: finding the live entries after a crash, checking that none an entry
//! depends on is missing, and applying them in dependency order.

use std::collections::HashMap;

use persim_ringbuf::{PmAccess, Region};

use crate::error::{ClaimError, ReplayError, ReplayStop};
use crate::header::{LogHeader, LogState};
use crate::layout::{EntryHeader, Position, HEADER_SIZE};
use crate::log::{lock, Chunks, Generations, ZilPmem};

/// An entry found by claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimedEntry {
    pub header: EntryHeader,
    pub chunk: usize,
    /// Offset of the header in its chunk.
    pub offset: usize,
}

/// What claim found: the live entries in replay order and where replay must stop.
#[derive(Clone, Debug)]
pub struct Claim {
    pub claim_txg: u64,
    /// Entries of txg `claim_txg` or later, in (generation, id) order, those a previous
    /// replay applied included.
    pub entries: Vec<ClaimedEntry>,
    /// Replay applies entries after this one (a resumed replay), or all.
    pub resume: Option<Position>,
    /// The highest txg of any entry found: the consumer's next txg must be later, so that
    /// these entries are never claimed again once replayed.
    pub max_txg: u64,
    /// Where replay must stop: a damaged entry header (then it applies nothing), or the
    /// first entry whose dependency is missing (the dry run of replay's check).
    pub missing: Option<ReplayStop>,
    /// The positions of the valid entries of each chunk, in chunk order (those of synced
    /// txgs included): what a dump of the log shows.
    pub scanned: Vec<Vec<Position>>,
    pub header: LogHeader,
}

impl Claim {
    /// The entries replay will apply, up to the first it must not.
    pub fn to_replay(&self) -> impl Iterator<Item = &ClaimedEntry> {
        let damaged = matches!(self.missing, Some(ReplayStop::DamagedHeader { .. }));
        let stop = match &self.missing {
            Some(ReplayStop::MissingDependency { entry, .. }) => Some(*entry),
            _ => None,
        };
        self.entries
            .iter()
            .filter(move |e| !damaged && self.resume.is_none_or(|r| e.header.position > r))
            .take_while(move |e| stop.is_none_or(|s| e.header.position < s))
    }

    /// The chunks whose entries' positions do not rise along the chunk: an entry of the
    /// chunk's earlier use follows a newer one, which zeroing the next header prevents.
    /// Replay skips such stale entries (their txgs are synced), so only this shows them.
    pub fn mixed_chunks(&self) -> Vec<usize> {
        (self.scanned.iter().enumerate())
            .filter(|(_, positions)| !positions.is_sorted_by(|a, b| a < b))
            .map(|(chunk, _)| chunk)
            .collect()
    }
}

/// An entry handed to the consumer.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    pub objset: u64,
    pub txg: u64,
    pub position: Position,
    pub body: &'a [u8],
}

impl<R: Region, A: PmAccess> ZilPmem<R, A> {
    /// Takes the log described by `header` (which the consumer stored with its last
    /// committed txg): scans each chunk up to its first invalid header, keeps the entries
    /// of `first_unsynced_txg` or later (or of the claim txg of an interrupted replay),
    /// and checks their dependencies without applying anything.
    ///
    /// Chunks without entries of this log are free; the others wait, bucketed by their
    /// highest txg, for [`ZilPmem::txg_synced`]. With [`LogState::NoLog`], every chunk is
    /// zeroed and freed.
    pub fn claim(
        &mut self,
        header: &LogHeader,
        first_unsynced_txg: u64,
    ) -> Result<Claim, ClaimError> {
        if self.claimed {
            return Err(ClaimError::AlreadyClaimed);
        }
        self.claimed = true;
        let all: Vec<usize> = (0..self.geometry.chunk_count).collect();
        let mut claim = Claim {
            claim_txg: first_unsynced_txg,
            entries: Vec::new(),
            resume: None,
            max_txg: 0,
            missing: None,
            scanned: Vec::new(),
            header: LogHeader {
                state: LogState::Replaying,
                claim_txg: first_unsynced_txg,
                ..*header
            },
        };
        if header.state == LogState::NoLog {
            self.zero_first_headers(&all);
            *lock(&self.chunks) = Chunks {
                free: all,
                ..Chunks::default()
            };
            claim.header.state = LogState::Logging;
            return Ok(claim);
        }
        if header.state == LogState::Replaying {
            claim.claim_txg = header.claim_txg;
            claim.header.claim_txg = header.claim_txg;
            claim.resume = Some(header.resume);
        }
        let mut chunks = Chunks::default();
        let mut max_gen = 0;
        let mut damaged = None;
        for chunk in all {
            let (found, damage) = self.scan_chunk(chunk, header);
            damaged = damaged.or(damage);
            match found.iter().map(|e| e.header.txg).max() {
                None => chunks.free.push(chunk),
                Some(txg) => chunks.full.entry(txg).or_default().push(chunk),
            }
            claim
                .scanned
                .push(found.iter().map(|e| e.header.position).collect());
            for entry in found {
                claim.max_txg = claim.max_txg.max(entry.header.txg);
                max_gen = max_gen.max(entry.header.position.gen);
                if entry.header.txg >= claim.claim_txg {
                    claim.entries.push(entry);
                }
            }
        }
        // Committers take free chunks from the end: lowest index first.
        chunks.free.reverse();
        claim.entries.sort_by_key(|e| e.header.position);
        claim.missing = damaged.or_else(|| missing_dependency(&claim));
        *lock(&self.chunks) = chunks;
        // New entries sort after every entry found, and depend on none of them.
        *lock(&self.gens) = Generations {
            gen: max_gen,
            ..Generations::default()
        };
        Ok(claim)
    }

    /// The valid entries of `header`'s log in `chunk`, up to the first invalid header or
    /// the chunk's end (an entry that ends exactly at the end is valid), and that invalid
    /// header if it is damage rather than a zeroed or torn slot.
    fn scan_chunk(
        &self,
        chunk: usize,
        header: &LogHeader,
    ) -> (Vec<ClaimedEntry>, Option<ReplayStop>) {
        let chunk_size = self.geometry.chunk_size;
        let bytes = self.chunk_bytes(chunk);
        let mut found = Vec::new();
        let mut offset = 0;
        while offset + HEADER_SIZE <= chunk_size {
            let Some(entry) = EntryHeader::decode(&bytes[offset..]) else {
                let damage = EntryHeader::reserved_bytes_written(&bytes[offset..])
                    .then_some(ReplayStop::DamagedHeader { chunk, offset });
                return (found, damage);
            };
            let fits = entry.len as usize <= chunk_size - offset;
            if !fits || entry.pool_guid != header.pool_guid || entry.log_guid != header.log_guid {
                break;
            }
            found.push(ClaimedEntry {
                header: entry,
                chunk,
                offset,
            });
            offset += entry.len as usize;
        }
        (found, None)
    }

    fn chunk_bytes(&self, chunk: usize) -> &[u8] {
        let at = self.geometry.chunk_offset(chunk);
        // SAFETY: the chunk lies inside the region (checked at open); claim and replay
        // take `&mut self`, so no committer writes while the bytes are borrowed.
        unsafe { std::slice::from_raw_parts(self.region.base().add(at), self.geometry.chunk_size) }
    }

    /// Applies the claimed entries after the resume point in (generation, id) order:
    /// `apply(entry, header)` must make the entry's effect durable together with
    /// `header`, whose resume point names that entry, so that a crash during replay
    /// resumes after it. Stops before an entry whose body fails its checksum or whose
    /// dependency is missing, and applies nothing when claim found a damaged header. On
    /// success, returns the header to store (logging again) and allows appends.
    pub fn replay<E>(
        &mut self,
        claim: &Claim,
        mut apply: impl FnMut(Entry<'_>, &LogHeader) -> Result<(), E>,
    ) -> Result<LogHeader, ReplayError<E>> {
        let mut header = claim.header;
        for claimed in claim.to_replay() {
            let h = &claimed.header;
            let start = claimed.offset + HEADER_SIZE;
            let body = &self.chunk_bytes(claimed.chunk)[start..][..h.body_len as usize];
            if !cfg!(feature = "mutant-no-body-checksum") && crc32c::crc32c(body) != h.body_crc {
                return Err(ReplayError::Stopped(ReplayStop::BodyChecksum {
                    entry: h.position,
                    chunk: claimed.chunk,
                    offset: claimed.offset,
                }));
            }
            header.resume = h.position;
            let entry = Entry {
                objset: h.objset,
                txg: h.txg,
                position: h.position,
                body,
            };
            apply(entry, &header).map_err(|error| ReplayError::Consumer {
                entry: h.position,
                error,
            })?;
        }
        if let Some(stop) = &claim.missing {
            return Err(ReplayError::Stopped(stop.clone()));
        }
        self.ready = Some((header.pool_guid, header.log_guid));
        Ok(LogHeader {
            state: LogState::Logging,
            claim_txg: 0,
            resume: Position::default(),
            ..header
        })
    }
}

/// The first entry (in replay order, after the resume point) whose previous generation
/// does not have the entries its dependency record counts, among txgs claim kept.
fn missing_dependency(claim: &Claim) -> Option<ReplayStop> {
    let mut counts: HashMap<(u64, u64), u64> = HashMap::new();
    for e in &claim.entries {
        *counts
            .entry((e.header.position.gen, e.header.txg))
            .or_default() += 1;
    }
    claim
        .entries
        .iter()
        .filter(|e| claim.resume.is_none_or(|r| e.header.position > r))
        .find_map(|e| {
            let dep = e.header.dep;
            dep.counts
                .iter()
                .filter(|&&(txg, n)| n > 0 && txg >= claim.claim_txg && dep.last_gen > 0)
                .find_map(|&(txg, expected)| {
                    let found = counts.get(&(dep.last_gen, txg)).copied().unwrap_or(0);
                    (found != expected).then_some(ReplayStop::MissingDependency {
                        entry: e.header.position,
                        gen: dep.last_gen,
                        txg,
                        expected,
                        found,
                    })
                })
        })
}
