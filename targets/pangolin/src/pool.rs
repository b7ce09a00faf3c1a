//! A pool: format, open (with recovery), direct reads, object verification and repair, and
//! scrubbing.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use persim_ringbuf::{PmAccess, Region};

use crate::alloc::{Bitmaps, Overlay};
use crate::checksum;
use crate::columns::Columns;
use crate::error::{OpenError, TxError};
use crate::lanes::Lanes;
use crate::layout::{Geometry, Meta, Zone, LINE, OBJ_HEADER, PAGE, UNIT};
use crate::log::{self, Found};
use crate::parity;
use crate::pm::Pm;
use crate::repair;

/// The type number of the zones' bitmap objects.
pub const BITMAP_TYPE: u32 = u32::MAX;

/// An object's header: data bytes, type number, Adler32 checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub size: u64,
    pub type_num: u32,
    pub sum: u32,
}

impl Header {
    pub fn encode(&self) -> [u8; OBJ_HEADER as usize] {
        let mut bytes = [0; OBJ_HEADER as usize];
        bytes[0..4].copy_from_slice(&(self.size as u32).to_le_bytes());
        bytes[4..8].copy_from_slice(&self.type_num.to_le_bytes());
        bytes[8..12].copy_from_slice(&self.sum.to_le_bytes());
        bytes
    }

    pub(crate) fn decode(bytes: &[u8]) -> Header {
        let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4"));
        Header {
            size: u64::from(word(0)),
            type_num: word(4),
            sum: word(8),
        }
    }

    /// The checksum of an object: over its header's size, type and reserved word, then its
    /// data (the checksum field itself excluded).
    pub fn checksum(header: &[u8], data: &[u8]) -> u32 {
        checksum::full(&[&header[0..8], &header[12..16], data])
    }

    /// Where data byte `k` sits in the checksummed stream, and the stream's length.
    pub fn stream(size: u64, k: u64) -> (u64, u64) {
        (12 + k, 12 + size)
    }
}

/// What a scrub checked and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubReport {
    /// Objects verified (bitmap objects included).
    pub objects: u64,
    /// Objects rebuilt from parity.
    pub repaired: Vec<u64>,
    /// Objects that fail their checksum and parity cannot rebuild.
    pub lost: Vec<u64>,
    /// Page columns whose parity was rewritten because it did not match verified data.
    pub parity_rewritten: u64,
    /// Metadata copies rewritten from the other copy.
    pub metadata_rewritten: u64,
}

impl ScrubReport {
    /// Nothing was damaged.
    pub fn is_clean(&self) -> bool {
        self.repaired.is_empty()
            && self.lost.is_empty()
            && self.parity_rewritten == 0
            && self.metadata_rewritten == 0
    }
}

/// A Pangolin pool on a PM region, written through `A`. Threads share it (`&Pool`), each
/// running its own transactions; what they open they isolate themselves, as with
/// libpmemobj (a lock per object or structure).
pub struct Pool<R, A> {
    pub(crate) pm: Pm<R, A>,
    pub(crate) meta: Meta,
    pub(crate) bitmaps: Bitmaps,
    pub(crate) lanes: Lanes,
    pub(crate) columns: Columns,
    /// Repairs since the pool was opened: objects rebuilt from parity, metadata copies
    /// and parity pages rewritten.
    repairs: AtomicU64,
    /// Per zone, what `locate` needs, worked out once: every `pgl_get` locates.
    zones: Vec<ZoneBounds>,
    zones_start: u64,
    zone_size: u64,
}

/// A zone's data bytes, `base..data_end`, and the first unit after its bitmap object.
struct ZoneBounds {
    base: u64,
    data_end: u64,
    first_unit: u64,
}

impl<R: Region, A: PmAccess> Pool<R, A> {
    /// Formats `region` (its whole length) as an empty pool of `geometry` with a root
    /// object of `root_size` bytes (none if 0), and opens it.
    pub fn format(
        region: R,
        access: A,
        mut geometry: Geometry,
        root_size: u64,
    ) -> Result<Self, OpenError> {
        geometry.pool_len = region.len() as u64;
        geometry.validate()?;
        let pm = Pm { region, access };
        let zero = vec![0; PAGE as usize];
        for page in 0..geometry.pool_len / PAGE {
            pm.store(page * PAGE, &zero);
        }
        let mut root = 0;
        for index in 0..geometry.zone_count() {
            let zone = geometry.zone(index);
            let mut maps = Bitmaps::default();
            maps.push(vec![0; zone.bitmap_len() as usize], 0);
            let mut overlay = Overlay::new();
            maps.mark(&mut overlay, 0, 0, zone.bitmap_units(), true);
            let mut shared = maps.lock();
            if index == 0 && root_size > 0 {
                let units = (OBJ_HEADER + root_size).div_ceil(UNIT);
                if zone.bitmap_units() + units > zone.units() || root_size > u64::from(u32::MAX) {
                    return Err(OpenError::RootTooLarge(root_size));
                }
                maps.mark(&mut overlay, 0, zone.bitmap_units(), units, true);
                root = zone.base + zone.bitmap_units() * UNIT;
                write_object(&pm, root, 0, &vec![0; root_size as usize]);
            }
            maps.apply(&mut shared, &overlay, &[]);
            drop(shared);
            write_object(&pm, zone.base, BITMAP_TYPE, &maps.bytes(0));
            for within in (0..zone.chunk).step_by(LINE as usize) {
                let (at, line) = parity::recompute_line(&pm, &zone, zone.base + within);
                pm.store(at, &line);
            }
        }
        let line = Meta { geometry, root }.encode();
        pm.store(0, &line);
        pm.store(PAGE, &line);
        pm.fence();
        Self::open(pm.region, pm.access)
    }

    /// Opens the pool in `region`: repairs a damaged metadata copy, completes a committed
    /// transaction that a crash interrupted, and loads the allocation bitmaps (verified).
    pub fn open(region: R, access: A) -> Result<Self, OpenError> {
        let pm = Pm { region, access };
        let (meta, rewritten) = check_metadata(&pm)?;
        if meta.geometry.pool_len != pm.region.len() as u64 {
            return Err(OpenError::WrongLength(meta.geometry.pool_len));
        }
        meta.geometry.validate()?;
        let seqs = recover(&pm, &meta.geometry)?;
        let mut pool = Pool {
            pm,
            meta,
            bitmaps: Bitmaps::default(),
            lanes: Lanes::new(&seqs),
            columns: Columns::new(&meta.geometry),
            repairs: AtomicU64::new(rewritten),
            zones: (0..meta.geometry.zone_count())
                .map(|index| {
                    let zone = meta.geometry.zone(index);
                    ZoneBounds {
                        base: zone.base,
                        data_end: zone.parity_base(),
                        first_unit: zone.bitmap_units(),
                    }
                })
                .collect(),
            zones_start: meta.geometry.zones_start(),
            zone_size: meta.geometry.zone_size(),
        };
        for index in 0..meta.geometry.zone_count() {
            let zone = meta.geometry.zone(index);
            pool.verify_bitmap(&zone)
                .map_err(|_| OpenError::LostBitmap(zone.base))?;
            let header = pool.header(zone.base);
            let data = pool.pm.bytes(zone.base + OBJ_HEADER, header.size).to_vec();
            pool.bitmaps.push(data, header.sum);
        }
        Ok(pool)
    }

    pub fn geometry(&self) -> Geometry {
        self.meta.geometry
    }

    /// The root object given at format time (0 if none).
    pub fn root(&self) -> u64 {
        self.meta.root
    }

    pub fn access(&self) -> &A {
        &self.pm.access
    }

    pub fn into_region(self) -> R {
        self.pm.region
    }

    /// Repairs since the pool was opened, those `open` made before any scrub included (a
    /// metadata copy, a bitmap): objects rebuilt from parity, metadata copies and parity
    /// pages rewritten.
    pub fn repairs(&self) -> u64 {
        self.repairs.load(Ordering::Relaxed)
    }

    pub(crate) fn header(&self, oid: u64) -> Header {
        Header::decode(self.pm.bytes(oid, OBJ_HEADER))
    }

    /// The data of object `oid`, read directly from PM without verification (`pgl_get`).
    pub fn get(&self, oid: u64) -> Result<&[u8], TxError> {
        let (index, unit) = self.locate(oid, &Overlay::new())?;
        let mut size = self.header(oid).size;
        // The object's units hold the size its header claims (the common case, checked
        // without measuring the whole extent), or the size is cut to them.
        if !self
            .bitmaps
            .spans(index, unit, (OBJ_HEADER + size).div_ceil(UNIT))
        {
            size = size.min(self.extent_bytes(oid) - OBJ_HEADER);
        }
        Ok(self.pm.bytes(oid + OBJ_HEADER, size))
    }

    /// Where the data of object `oid` starts, checked only to be an allocated object
    /// (`pgl_get` in C, which returns a pointer: the size is not needed, so not measured).
    /// Inlined, without `locate`'s overlay: most of a map's calls are these reads.
    #[inline]
    pub fn direct(&self, oid: u64) -> Result<*const u8, TxError> {
        match self.place(oid) {
            Some((index, unit, data_end))
                if oid < data_end && self.bitmaps.is_committed_object(index, unit) =>
            {
                Ok(self.pm.bytes(oid + OBJ_HEADER, 0).as_ptr())
            }
            _ => Err(TxError::BadObject(oid)),
        }
    }

    /// The type number of object `oid`.
    pub fn type_num(&self, oid: u64) -> Result<u32, TxError> {
        self.locate(oid, &Overlay::new())?;
        Ok(self.header(oid).type_num)
    }

    /// Every allocated object, in pool order (bitmap objects not included).
    pub fn objects(&self) -> Vec<u64> {
        let mut oids = Vec::new();
        for index in 0..self.meta.geometry.zone_count() {
            let zone = self.meta.geometry.zone(index);
            for unit in zone.bitmap_units()..zone.units() {
                if self.bitmaps.is_object(&Overlay::new(), index, unit) {
                    oids.push(zone.base + unit * UNIT);
                }
            }
        }
        oids
    }

    /// The zone index and unit of `oid`, if it names an object.
    pub(crate) fn locate(&self, oid: u64, overlay: &Overlay) -> Result<(usize, u64), TxError> {
        let found = self.place(oid).filter(|&(index, unit, data_end)| {
            oid < data_end && self.bitmaps.is_object(overlay, index, unit)
        });
        found
            .map(|(index, unit, _)| (index, unit))
            .ok_or(TxError::BadObject(oid))
    }

    /// The zone index and unit of `oid` and where its zone's data ends, if `oid` is the
    /// start of a unit after a zone's bitmap object: the divisions by constants of the
    /// pool, worked out once (every `pgl_get` asks).
    #[inline]
    fn place(&self, oid: u64) -> Option<(usize, u64, u64)> {
        let rel = oid.checked_sub(self.zones_start)?;
        let index = (rel / self.zone_size) as usize;
        let zone = self.zones.get(index)?;
        let rel = oid - zone.base;
        let unit = rel / UNIT;
        (rel.is_multiple_of(UNIT) && unit >= zone.first_unit).then_some((
            index,
            unit,
            zone.data_end,
        ))
    }

    /// The zone index, parity row start and parity byte of data byte `at` (every line a
    /// commit writes): from the bounds worked out at open, with one division.
    #[inline]
    pub(crate) fn parity_place(&self, at: u64) -> (usize, u64, u64) {
        let index = ((at - self.zones_start) / self.zone_size) as usize;
        let zone = &self.zones[index];
        debug_assert!((zone.base..zone.data_end).contains(&at), "data bytes only");
        let within = (at - zone.base) % self.meta.geometry.chunk_size;
        (index, zone.data_end, zone.data_end + within)
    }

    /// Bytes the object at `oid` may span, from the bitmaps.
    fn extent_bytes(&self, oid: u64) -> u64 {
        let (index, zone) = self.meta.geometry.zone_of(oid).expect("an object's zone");
        let unit = (oid - zone.base) / UNIT;
        if unit == 0 {
            return zone.bitmap_units() * UNIT;
        }
        self.bitmaps
            .extent(&Overlay::new(), index, unit, zone.units())
            * UNIT
    }

    /// Whether the object at `oid`, spanning at most `extent` bytes, matches its checksum.
    fn intact(&self, oid: u64, extent: u64) -> bool {
        object_intact(self.pm.bytes(oid, extent))
    }

    /// Checks object `oid` against its checksum and rebuilds it from parity if it fails.
    pub(crate) fn verify(&self, oid: u64) -> Result<(), TxError> {
        // The units its header claims, if committed as one object, suffice to check it (as
        // in `get`); else the whole extent is measured.
        let (index, zone) = self.meta.geometry.zone_of(oid).expect("an object's zone");
        let units = (OBJ_HEADER + self.header(oid).size).div_ceil(UNIT);
        let unit = (oid - zone.base) / UNIT;
        if unit > 0 && self.bitmaps.spans(index, unit, units) && self.intact(oid, units * UNIT) {
            return Ok(());
        }
        let extent = self.extent_bytes(oid);
        if self.intact(oid, extent) {
            return Ok(());
        }
        self.repair(oid, extent)
    }

    fn verify_bitmap(&self, zone: &Zone) -> Result<(), TxError> {
        let extent = zone.bitmap_units() * UNIT;
        if self.intact(zone.base, extent) {
            return Ok(());
        }
        self.repair(zone.base, extent)
    }

    /// Rebuilds the object from parity (see `repair`), writing back what changes, with
    /// its zone's columns held exclusive (no commit midway between data and parity).
    fn repair(&self, oid: u64, extent: u64) -> Result<(), TxError> {
        let (index, zone) = self.meta.geometry.zone_of(oid).expect("an object's zone");
        let columns = self.columns.of_zone(index);
        columns.clone().for_each(|id| self.columns.lock(id, true));
        let current = self.pm.bytes(oid, extent).to_vec();
        let syndrome = parity::syndrome(&self.pm, &zone, oid, extent);
        let within = (oid - zone.base) % zone.chunk;
        let repaired = repair::find(&current, &syndrome, within, zone.chunk);
        if let Some(repaired) = &repaired {
            self.write_repaired(oid, &current, repaired);
        }
        columns.for_each(|id| self.columns.unlock(id, true));
        repaired.map(|_| ()).ok_or(TxError::Unrepairable(oid))
    }

    /// Stores the lines of the object at `oid` that differ between `current` and `repaired`.
    fn write_repaired(&self, oid: u64, current: &[u8], repaired: &[u8]) {
        let end = oid + current.len() as u64;
        for line in (oid / LINE * LINE..end).step_by(LINE as usize) {
            let mut bytes = self.pm.line(line);
            let mut changed = false;
            for (k, byte) in bytes.iter_mut().enumerate() {
                let at = line + k as u64;
                if (oid..end).contains(&at)
                    && repaired[(at - oid) as usize] != current[(at - oid) as usize]
                {
                    *byte = repaired[(at - oid) as usize];
                    changed = true;
                }
            }
            if changed {
                self.pm.store(line, &bytes);
            }
        }
        self.pm.fence();
        self.repairs.fetch_add(1, Ordering::Relaxed);
    }

    /// Verifies everything: both metadata copies, every object (repairing from parity what
    /// fails its checksum), then every parity page against the verified data. No
    /// transaction may run meanwhile (`&mut`).
    pub fn scrub(&mut self) -> ScrubReport {
        let mut report = ScrubReport::default();
        if let Ok((_, rewritten)) = check_metadata(&self.pm) {
            report.metadata_rewritten = rewritten;
            *self.repairs.get_mut() += rewritten;
        }
        for index in 0..self.meta.geometry.zone_count() {
            let zone = self.meta.geometry.zone(index);
            let mut oids = vec![zone.base];
            oids.extend(self.objects().into_iter().filter(|&oid| zone.is_data(oid)));
            let mut lost = BTreeSet::new();
            for oid in oids {
                report.objects += 1;
                let extent = self.extent_bytes(oid);
                if self.intact(oid, extent) {
                    continue;
                }
                match self.repair(oid, extent) {
                    Ok(()) => report.repaired.push(oid),
                    Err(_) => {
                        lost.insert(oid);
                    }
                }
            }
            // Rewriting parity over lost data would make the loss permanent.
            if lost.is_empty() {
                for column in parity::inconsistent_columns(&self.pm, &zone) {
                    let page = zone.parity_base() + column * PAGE;
                    let bytes = parity::rebuild_page(&self.pm, &zone, page);
                    self.pm.store(page, &bytes);
                    report.parity_rewritten += 1;
                    *self.repairs.get_mut() += 1;
                }
                self.pm.fence();
            }
            report.lost.extend(lost);
        }
        report
    }
}

/// Whether `object` (header and data, its extent) matches its checksum.
fn object_intact(object: &[u8]) -> bool {
    let header = Header::decode(object);
    header.size <= object.len() as u64 - OBJ_HEADER
        && Header::checksum(
            object,
            &object[OBJ_HEADER as usize..(OBJ_HEADER + header.size) as usize],
        ) == header.sum
}

/// Stores a new object (header and data, whole lines) at `oid`; not yet durable.
fn write_object<R: Region, A: PmAccess>(pm: &Pm<R, A>, oid: u64, type_num: u32, data: &[u8]) {
    let mut bytes = encode_object(type_num, data);
    bytes.resize(bytes.len().div_ceil(LINE as usize) * LINE as usize, 0);
    pm.store(oid, &bytes);
}

/// An object's bytes: its header (size, type, checksum) and data.
pub(crate) fn encode_object(type_num: u32, data: &[u8]) -> Vec<u8> {
    let mut header = Header {
        size: data.len() as u64,
        type_num,
        sum: 0,
    }
    .encode();
    let sum = Header::checksum(&header, data);
    header[8..12].copy_from_slice(&sum.to_le_bytes());
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(data);
    bytes
}

/// Reads both metadata copies and rewrites a damaged one from the other; returns the
/// metadata and how many copies were rewritten.
fn check_metadata<R: Region, A: PmAccess>(pm: &Pm<R, A>) -> Result<(Meta, u64), OpenError> {
    let copies = [Meta::decode(&pm.line(0)), Meta::decode(&pm.line(PAGE))];
    let meta = match (&copies[0], &copies[1]) {
        (Ok(meta), _) | (Err(_), Ok(meta)) => *meta,
        (Err(OpenError::NotFormatted), Err(OpenError::NotFormatted)) => {
            return Err(OpenError::NotFormatted)
        }
        (Err(e), Err(_)) => return Err(e.clone()),
    };
    let mut rewritten = 0;
    for (copy, decoded) in copies.iter().enumerate() {
        if decoded.as_ref() != Ok(&meta) {
            pm.store(copy as u64 * PAGE, &meta.encode());
            rewritten += 1;
        }
    }
    if rewritten > 0 {
        pm.fence();
    }
    Ok((meta, rewritten))
}

/// Completes the transactions committed in every lane: replays their redo logs (they
/// touch disjoint bytes: objects are isolated, bitmap changes commit one at a time),
/// recomputes the parity of every line they wrote, then clears their commit marks.
/// Returns each lane's sequence number.
fn recover<R: Region, A: PmAccess>(
    pm: &Pm<R, A>,
    geometry: &Geometry,
) -> Result<Vec<u64>, OpenError> {
    let mut seqs = Vec::new();
    let mut committed = Vec::new();
    for lane in 0..geometry.lanes as usize {
        match log::find(pm, geometry, lane) {
            Found::Idle(seq) => seqs.push(seq),
            Found::Lost => return Err(OpenError::LogLost),
            Found::Committed(runs, seq) => {
                seqs.push(seq);
                committed.push((lane, runs));
            }
        }
    }
    if committed.is_empty() {
        return Ok(seqs);
    }
    let mut touched = BTreeSet::new();
    for (at, bytes) in committed.iter().flat_map(|(_, runs)| runs) {
        let end = at + bytes.len() as u64;
        for line in (at / LINE * LINE..end).step_by(LINE as usize) {
            let mut new = pm.line(line);
            let from = line.max(*at);
            let to = end.min(line + LINE);
            new[(from - line) as usize..(to - line) as usize]
                .copy_from_slice(&bytes[(from - at) as usize..(to - at) as usize]);
            pm.store(line, &new);
            touched.insert(line);
        }
    }
    let mut parity_lines = std::collections::BTreeMap::new();
    for at in touched {
        let (_, zone) = geometry.zone_of(at).expect("logged lines are in zones");
        let (parity_at, line) = parity::recompute_line(pm, &zone, at);
        parity_lines.insert(parity_at, line);
    }
    for (at, line) in parity_lines {
        pm.store(at, &line);
    }
    pm.fence();
    for (lane, _) in &committed {
        log::reset(pm, geometry, *lane, seqs[*lane]);
    }
    pm.fence();
    Ok(seqs)
}
