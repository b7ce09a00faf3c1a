//! Transactions: micro-buffers of the objects opened, allocations and frees as pending
//! bitmap changes, and the commit protocol.
//!
//! Commit: check every micro-buffer's canaries; compute the new checksums incrementally;
//! gather the new bytes as whole lines; write the redo log to both copies; fence; write
//! the commit mark; fence; write the lines back and XOR each line's change into its parity
//! line; fence; clear the mark; fence.

use persim_ringbuf::{PmAccess, Region};

use crate::alloc::Overlay;
use crate::buffer::MicroBuffer;
use crate::checksum;
use crate::error::TxError;
use crate::layout::{LINE, OBJ_HEADER, UNIT};
use crate::log;
use crate::pm::Line;
use crate::pool::{Header, Pool, BITMAP_TYPE};

/// A transaction's volatile state, apart from its pool (the C ABI keeps it per thread).
#[derive(Default)]
pub struct TxState {
    /// The micro-buffers by object, in the order made: a transaction opens few objects,
    /// and every `pgl_get` asks here first, so a short vector searched from the end (the
    /// object opened last is asked for most) beats a map.
    buffers: Vec<(u64, MicroBuffer)>,
    /// A bit per object unit modulo 64 of every buffered object (left set when one goes):
    /// most reads are of objects without a buffer, answered without a search.
    buffered: u64,
    /// Buffers of earlier transactions, to reuse.
    spare: Vec<MicroBuffer>,
    overlay: Overlay,
}

impl TxState {
    /// Forgets the transaction, keeping its memory for the next one.
    pub fn clear(&mut self) {
        self.spare.extend(self.buffers.drain(..).map(|(_, b)| b));
        self.buffered = 0;
        self.overlay.clear();
    }

    /// Adds a buffer for `oid` holding `data` (zeros if none), reusing a spare one.
    fn make(&mut self, oid: u64, data: Result<&[u8], u64>, type_num: u32, sum: u32) -> usize {
        let buffer = match (self.spare.pop(), data) {
            (Some(mut b), Ok(data)) => {
                b.reuse(oid, data, type_num, sum, false);
                b
            }
            (Some(mut b), Err(size)) => {
                b.reuse_zeroed(oid, size, type_num);
                b
            }
            (None, Ok(data)) => MicroBuffer::new(oid, data, type_num, sum, false),
            (None, Err(size)) => MicroBuffer::zeroed(oid, size, type_num),
        };
        self.buffers.push((oid, buffer));
        self.buffered |= unit_bit(oid);
        self.buffers.len() - 1
    }

    /// The micro-buffer of `oid`, if the transaction made one.
    pub fn buffer(&mut self, oid: u64) -> Option<&mut MicroBuffer> {
        self.position(oid).map(|k| &mut self.buffers[k].1)
    }

    /// A bit per unit modulo 64 of every object this transaction may hold a buffer of:
    /// when `unit_bit(oid)` is not in it, `buffer(oid)` is `None` (the C ABI keeps a copy,
    /// to answer most reads without reaching the state).
    pub fn buffered(&self) -> u64 {
        self.buffered
    }

    fn position(&self, oid: u64) -> Option<usize> {
        if self.buffered & unit_bit(oid) == 0 {
            return None;
        }
        self.buffers.iter().rposition(|(o, _)| *o == oid)
    }
}

/// The bit of [`TxState::buffered`] for object `oid`.
pub fn unit_bit(oid: u64) -> u64 {
    1 << (oid / UNIT % 64)
}

/// An open transaction on a pool; dropping it without [`Tx::commit`] aborts it.
pub struct Tx<'p, R: Region, A: PmAccess> {
    pool: &'p mut Pool<R, A>,
    state: TxState,
    done: bool,
}

impl<R: Region, A: PmAccess> Pool<R, A> {
    /// Begins a transaction (`pgl_tx_begin`).
    pub fn begin(&mut self) -> Tx<'_, R, A> {
        self.pm.access.append_boundary();
        Tx {
            pool: self,
            state: TxState::default(),
            done: false,
        }
    }

    /// Opens object `oid` for a single-object atomic update (`pgl_open`); `pgl_commit` is
    /// [`Tx::commit`].
    pub fn open_one(&mut self, oid: u64) -> Result<Tx<'_, R, A>, TxError> {
        let mut tx = self.begin();
        tx.open(oid)?;
        Ok(tx)
    }

    /// Allocates an object of `size` zeroed bytes and type `type_num` (`pgl_tx_alloc`).
    pub fn tx_alloc(
        &mut self,
        state: &mut TxState,
        size: u64,
        type_num: u32,
    ) -> Result<u64, TxError> {
        let units = (OBJ_HEADER + size).div_ceil(UNIT);
        if type_num == BITMAP_TYPE {
            return Err(TxError::ReservedType);
        }
        if size > u64::from(u32::MAX) {
            return Err(TxError::OutOfSpace(size));
        }
        let geometry = self.meta.geometry;
        for index in 0..geometry.zone_count() {
            let zone = geometry.zone(index);
            if let Some(unit) = self
                .bitmaps
                .find(&state.overlay, index, zone.units(), units)
            {
                self.bitmaps
                    .mark(&mut state.overlay, index, unit, units, true);
                let oid = zone.base + unit * UNIT;
                state.make(oid, Err(size), type_num, 0);
                return Ok(oid);
            }
        }
        Err(TxError::OutOfSpace(size))
    }

    /// Frees object `oid` when the transaction commits (`pgl_tx_free`).
    pub fn tx_free(&mut self, state: &mut TxState, oid: u64) -> Result<(), TxError> {
        let (index, unit) = self.locate(oid, &state.overlay)?;
        let known = state.position(oid);
        if known.is_none_or(|k| !state.buffers[k].1.new) {
            self.verify(oid)?;
        }
        let zone = self.meta.geometry.zone(index);
        let units = self
            .bitmaps
            .extent(&state.overlay, index, unit, zone.units());
        self.bitmaps
            .mark(&mut state.overlay, index, unit, units, false);
        if let Some(k) = known {
            state.buffers.swap_remove(k);
        }
        Ok(())
    }

    /// The micro-buffer of `oid`, made on first use from the verified (and, if needed,
    /// repaired) object.
    fn buffer<'s>(
        &mut self,
        state: &'s mut TxState,
        oid: u64,
    ) -> Result<&'s mut MicroBuffer, TxError> {
        let k = match state.position(oid) {
            Some(k) => k,
            None => {
                self.locate(oid, &state.overlay)?;
                self.verify(oid)?;
                let header = self.header(oid);
                let data = self.pm.bytes(oid + OBJ_HEADER, header.size);
                state.make(oid, Ok(data), header.type_num, header.sum)
            }
        };
        Ok(&mut state.buffers[k].1)
    }

    /// Opens `oid` for writing its whole data (`pgl_tx_open`); returns the micro-buffer.
    pub fn tx_open<'s>(
        &mut self,
        state: &'s mut TxState,
        oid: u64,
    ) -> Result<&'s mut MicroBuffer, TxError> {
        let buffer = self.buffer(state, oid)?;
        buffer.touch(0, buffer.size);
        Ok(buffer)
    }

    /// Opens `oid` for writing data `offset..offset + len` (`pgl_tx_add_range`).
    pub fn tx_add_range<'s>(
        &mut self,
        state: &'s mut TxState,
        oid: u64,
        offset: u64,
        len: u64,
    ) -> Result<&'s mut MicroBuffer, TxError> {
        let buffer = self.buffer(state, oid)?;
        if offset.checked_add(len).is_none_or(|end| end > buffer.size) {
            return Err(TxError::OutOfObject {
                oid,
                offset,
                len,
                size: buffer.size,
            });
        }
        buffer.touch(offset, offset + len);
        Ok(buffer)
    }

    /// Commits `state` (`pgl_tx_commit`): durable when this returns `Ok`; on `Err` nothing
    /// was written. `state` is cleared either way, for the next transaction.
    pub fn tx_commit(&mut self, state: &mut TxState) -> Result<(), TxError> {
        let mut lines = Lines(std::mem::take(&mut self.scratch.lines));
        let result = self.commit_inner(state, &mut lines);
        lines.0.clear();
        self.scratch.lines = lines.0;
        state.clear();
        self.pm.access.append_boundary();
        result
    }

    fn commit_inner(&mut self, state: &mut TxState, lines: &mut Lines) -> Result<(), TxError> {
        // In pool order, so that the lines gathered mostly ascend.
        state.buffers.sort_unstable_by_key(|(oid, _)| *oid);
        for (oid, buffer) in &state.buffers {
            let oid = *oid;
            if !buffer.canaries_hold(oid) {
                return Err(TxError::Canary(oid));
            }
        }
        for (oid, buffer) in &mut state.buffers {
            self.gather_object(lines, *oid, buffer);
        }
        let sums = self.gather_bitmaps(lines, &mut state.overlay);
        // Each line's changed bytes, found once for the log, the write-back and parity.
        lines.0.retain_mut(|(_, old, new, span)| {
            changed_span(old, new).inspect(|s| *span = *s).is_some()
        });
        if lines.0.is_empty() {
            self.bitmaps.apply(&state.overlay, &sums);
            return Ok(());
        }
        let body = lines.log_body(std::mem::take(&mut self.scratch.body));
        if body.len() as u64 > log::capacity(&self.meta.geometry) {
            return Err(TxError::LogFull(body.len() as u64));
        }
        let geometry = self.meta.geometry;
        let seq = self.seq + 1;
        log::write(&mut self.pm, &geometry, &body);
        self.pm.fence();
        let mark = log::mark(&mut self.pm, &geometry, seq, &body);
        self.pm.fence();
        // Few lines a commit: a vector searched from the end beats a map.
        // Per parity line, its new bytes and the span of the changes XORed in.
        let mut parity = std::mem::take(&mut self.scratch.parity);
        parity.clear();
        for &(at, ref old, ref new, (first, last)) in &lines.0 {
            let (_, zone) = geometry.zone_of(at).expect("objects are in zones");
            let parity_at = zone.parity_of(at);
            let k = match parity.iter().rposition(|(p, ..)| *p == parity_at) {
                Some(k) => k,
                None => {
                    parity.push((parity_at, self.pm.line(parity_at), (first, last)));
                    parity.len() - 1
                }
            };
            let (_, line, span) = &mut parity[k];
            *span = (span.0.min(first), span.1.max(last));
            for (p, (o, n)) in line.iter_mut().zip(old.iter().zip(new)) {
                *p ^= o ^ n;
            }
        }
        // Only the changed bytes of each line (and of its parity line) are stored.
        for (at, _, new, (first, last)) in &lines.0 {
            self.pm.store_part(at + *first as u64, &new[*first..=*last]);
        }
        for (at, line, (first, last)) in &parity {
            self.pm
                .store_part(at + *first as u64, &line[*first..=*last]);
        }
        self.scratch.parity = parity;
        self.scratch.body = body;
        self.pm.fence();
        log::clear(&mut self.pm, &geometry, mark);
        self.pm.fence();
        self.seq = seq;
        self.bitmaps.apply(&state.overlay, &sums);
        Ok(())
    }

    /// Adds the new bytes of object `oid` and its new checksum: for a new object all of
    /// it, else only the changed ranges, the checksum updated by their change.
    fn gather_object(&self, lines: &mut Lines, oid: u64, buffer: &mut MicroBuffer) {
        let mut header = Header {
            size: buffer.size,
            type_num: buffer.type_num,
            sum: buffer.sum,
        };
        if buffer.new {
            header.sum = Header::checksum(&header.encode(), buffer.data());
            lines.put(&self.pm, oid, &header.encode());
            lines.put(&self.pm, oid + OBJ_HEADER, buffer.data());
            return;
        }
        buffer.merged();
        let ranges = &buffer.modified;
        for &(start, end) in ranges {
            let old = self.pm.bytes(oid + OBJ_HEADER + start, end - start);
            let new = &buffer.data()[start as usize..end as usize];
            let (at, len) = Header::stream(buffer.size, start);
            header.sum = checksum::update(header.sum, len, at, old, new);
        }
        // The checksum's line first, so that the object's lines go in ascending order.
        lines.put(&self.pm, oid + 8, &header.sum.to_le_bytes());
        for &(start, end) in ranges {
            let new = &buffer.data()[start as usize..end as usize];
            lines.put(&self.pm, oid + OBJ_HEADER + start, new);
        }
    }

    /// Adds the changed bytes of every zone's bitmap object and its new checksum; returns
    /// the new checksums.
    fn gather_bitmaps(&self, lines: &mut Lines, overlay: &mut Overlay) -> Vec<(usize, u32)> {
        // Per zone changed, ascending: its new checksum.
        let mut sums: Vec<(usize, u32)> = Vec::new();
        for &((zone, index), new) in overlay.sorted() {
            let old = self.bitmaps.data[zone][index as usize];
            if old == new {
                continue;
            }
            let base = self.meta.geometry.zone(zone).base;
            let size = self.bitmaps.data[zone].len() as u64;
            if sums.last().is_none_or(|(z, _)| *z != zone) {
                sums.push((zone, self.bitmaps.sums[zone]));
            }
            let sum = &mut sums.last_mut().expect("just pushed").1;
            let (at, len) = Header::stream(size, index);
            *sum = checksum::update_byte(*sum, len, at, old, new);
            lines.put(&self.pm, base + OBJ_HEADER + index, &[new]);
        }
        for &(zone, sum) in &sums {
            let base = self.meta.geometry.zone(zone).base;
            lines.put(&self.pm, base + 8, &sum.to_le_bytes());
        }
        sums
    }
}

/// The lines a commit changes, in the order first touched: (line offset, bytes on PM, new
/// bytes).
pub(crate) struct Lines(Vec<ChangedLine>);

/// A line a commit changes: its offset, bytes on PM, new bytes, and the first and last
/// bytes that differ (set once gathering is done).
type ChangedLine = (u64, Line, Line, (usize, usize));

/// A commit's working memory, kept by the pool from one commit to the next.
#[derive(Default)]
pub(crate) struct Scratch {
    lines: Vec<ChangedLine>,
    body: Vec<u8>,
    parity: Vec<(u64, Line, (usize, usize))>,
}

impl Lines {
    fn put<R: Region, A: PmAccess>(&mut self, pm: &crate::pm::Pm<R, A>, at: u64, bytes: &[u8]) {
        let mut done = 0;
        while done < bytes.len() {
            let pos = at + done as u64;
            let line = pos / LINE * LINE;
            let within = (pos - line) as usize;
            let len = (LINE as usize - within).min(bytes.len() - done);
            // Lines mostly come in ascending order: a new one is pushed without a search.
            let known = match self.0.last() {
                Some((last, ..)) if *last < line => None,
                _ => self.0.iter().rposition(|(l, ..)| *l == line),
            };
            let k = known.unwrap_or_else(|| {
                let old = pm.line(line);
                self.0.push((line, old, old, (0, 0)));
                self.0.len() - 1
            });
            self.0[k].2[within..within + len].copy_from_slice(&bytes[done..done + len]);
            done += len;
        }
    }

    /// The redo-log body: per line, the span of bytes that changed; spans of adjacent
    /// lines less than an entry header apart share an entry (the bytes between included).
    fn log_body(&self, memory: Vec<u8>) -> Vec<u8> {
        const JOIN: u64 = 16;
        let mut body = log::Body::reusing(memory);
        let mut previous: Option<&ChangedLine> = None;
        for entry @ &(at, _, ref new, (first, last)) in &self.0 {
            let start = at + first as u64;
            match (body.end(), previous) {
                (Some(end), Some((p_at, _, p_new, _)))
                    if p_at + LINE == at && start - end < JOIN =>
                {
                    body.push(end, &p_new[(end - p_at) as usize..]);
                    body.push(at, &new[..=last]);
                }
                _ => body.push(start, &new[first..=last]),
            }
            previous = Some(entry);
        }
        body.finish()
    }
}

/// The first and last bytes that differ between two lines, found a word at a time.
fn changed_span(old: &Line, new: &Line) -> Option<(usize, usize)> {
    let word =
        |line: &Line, w: usize| u64::from_le_bytes(line[8 * w..8 * w + 8].try_into().expect("8"));
    let diff = |w: usize| word(old, w) ^ word(new, w);
    let words = LINE as usize / 8;
    let first = (0..words).find(|&w| diff(w) != 0)?;
    let last = (first..words).rev().find(|&w| diff(w) != 0)?;
    Some((
        8 * first + diff(first).trailing_zeros() as usize / 8,
        8 * last + 7 - diff(last).leading_zeros() as usize / 8,
    ))
}

impl<R: Region, A: PmAccess> Tx<'_, R, A> {
    pub fn alloc(&mut self, size: u64, type_num: u32) -> Result<u64, TxError> {
        self.pool.tx_alloc(&mut self.state, size, type_num)
    }

    pub fn free(&mut self, oid: u64) -> Result<(), TxError> {
        self.pool.tx_free(&mut self.state, oid)
    }

    /// The whole data of `oid`, to change in place.
    pub fn open(&mut self, oid: u64) -> Result<&mut [u8], TxError> {
        Ok(self.pool.tx_open(&mut self.state, oid)?.data_mut())
    }

    /// Data `offset..offset + len` of `oid`, to change in place.
    pub fn add_range(&mut self, oid: u64, offset: u64, len: u64) -> Result<&mut [u8], TxError> {
        let buffer = self.pool.tx_add_range(&mut self.state, oid, offset, len)?;
        Ok(&mut buffer.data_mut()[offset as usize..(offset + len) as usize])
    }

    /// The data of `oid` as this transaction sees it (its micro-buffer if opened).
    pub fn read(&self, oid: u64) -> Result<&[u8], TxError> {
        match self.state.position(oid) {
            Some(k) => Ok(self.state.buffers[k].1.data()),
            None => self.pool.get(oid),
        }
    }

    /// The micro-buffer of `oid` for code that writes through pointers (the C ABI, and
    /// tests of the canaries).
    pub fn buffer_mut(&mut self, oid: u64) -> Result<&mut MicroBuffer, TxError> {
        self.pool.tx_open(&mut self.state, oid)
    }

    pub fn commit(mut self) -> Result<(), TxError> {
        self.done = true;
        self.pool.tx_commit(&mut self.state)
    }
}

impl<R: Region, A: PmAccess> Drop for Tx<'_, R, A> {
    /// Aborting: nothing reached PM; the checkpoint closes the transaction in a trace.
    fn drop(&mut self) {
        if !self.done {
            self.pool.pm.access.append_boundary();
        }
    }
}
