//! What recovery writes to the origin: the last state of every sector it touches, kept as
//! extents so that a discard of a whole device costs one entry, not one per sector.

use crate::entry::{Entry, SECTOR};
use serde::Serialize;
use std::collections::BTreeMap;

/// The state of origin sectors after replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectorState<'a> {
    /// Replay wrote these bytes (512 per sector).
    Written(&'a [u8]),
    /// Replay discarded the sectors: the origin may read them back as zeros or as old data.
    Discarded,
}

/// A run of sectors `start..end` that replay left in one state, from one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent<'a> {
    pub start: u64,
    pub end: u64,
    pub state: SectorState<'a>,
}

/// How the dump prints an extent: its range and kind, without the bytes.
#[derive(Serialize)]
pub struct ExtentSummary {
    pub start: u64,
    pub end: u64,
    pub discarded: bool,
}

impl<'a> Extent<'a> {
    /// The part `start..end` of this extent.
    fn slice(&self, start: u64, end: u64) -> Self {
        let state = match self.state {
            SectorState::Written(data) => {
                let from = ((start - self.start) * SECTOR) as usize;
                SectorState::Written(&data[from..from + ((end - start) * SECTOR) as usize])
            }
            SectorState::Discarded => SectorState::Discarded,
        };
        Self { start, end, state }
    }

    pub fn summary(&self) -> ExtentSummary {
        ExtentSummary {
            start: self.start,
            end: self.end,
            discarded: self.state == SectorState::Discarded,
        }
    }
}

/// The origin sectors that replay touches; a sector outside every extent keeps whatever
/// the origin held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SectorMap<'a> {
    /// Disjoint extents by their first sector.
    extents: BTreeMap<u64, Extent<'a>>,
}

impl<'a> SectorMap<'a> {
    /// Replays one entry over what the earlier ones left.
    pub fn apply(&mut self, entry: &Entry<'a>) {
        let start = entry.header.sector;
        let end = start + entry.header.sectors();
        let state = if entry.header.is_discard() {
            SectorState::Discarded
        } else {
            SectorState::Written(entry.data)
        };
        let before = self.extents.range(..start).next_back();
        let overlapping: Vec<u64> = before
            .filter(|(_, e)| e.end > start)
            .map(|(s, _)| *s)
            .into_iter()
            .chain(self.extents.range(start..end).map(|(s, _)| *s))
            .collect();
        for first in overlapping {
            let old = self.extents.remove(&first).unwrap();
            if old.start < start {
                self.extents.insert(old.start, old.slice(old.start, start));
            }
            if old.end > end {
                self.extents.insert(end, old.slice(end, old.end));
            }
        }
        self.extents.insert(start, Extent { start, end, state });
    }

    /// The state of `sector` after replay; `None` if replay does not touch it.
    pub fn get(&self, sector: u64) -> Option<SectorState<'a>> {
        let (_, extent) = self.extents.range(..=sector).next_back()?;
        (extent.end > sector).then(|| extent.slice(sector, sector + 1).state)
    }

    /// The extents in ascending order.
    pub fn extents(&self) -> impl Iterator<Item = &Extent<'a>> {
        self.extents.values()
    }

    /// Sectors whose last state is written data.
    pub fn written(&self) -> u64 {
        self.count(|s| s != SectorState::Discarded)
    }

    /// Sectors whose last state is a discard.
    pub fn discarded(&self) -> u64 {
        self.count(|s| s == SectorState::Discarded)
    }

    fn count(&self, which: impl Fn(SectorState) -> bool) -> u64 {
        self.extents()
            .filter(|e| which(e.state))
            .map(|e| e.end - e.start)
            .sum()
    }
}
