//! Streaming encoder: entries are encoded into a small buffer that is handed to zstd in
//! chunks, so memory stays constant however long the trace is.

use std::io::{self, Write};

use crate::binary::header::write_header;
use crate::binary::tags;
use crate::binary::varint::{delta, put_uvarint, DeltaBase};
use crate::entry::{Arg, Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op, BLOCK_SIZE};

/// zstd's default level: a good ratio at several hundred MB/s.
const ZSTD_LEVEL: i32 = 3;
/// Encoded bytes collected before they are passed to zstd; one call per entry would cost
/// more than the encoding itself.
const CHUNK_LEN: usize = 64 * 1024;

pub struct BinaryWriter<W: Write> {
    zstd: zstd::stream::write::Encoder<'static, W>,
    buf: Vec<u8>,
    base: DeltaBase,
    count: u64,
}

impl<W: Write> BinaryWriter<W> {
    /// Writes the header and starts the compressed entry stream.
    pub fn new(mut w: W, header: &Header) -> io::Result<Self> {
        write_header(&mut w, header)?;
        let mut zstd = zstd::stream::write::Encoder::new(w, ZSTD_LEVEL)?;
        zstd.include_checksum(true)?;
        zstd.window_log(tags::ZSTD_WINDOW_LOG)?;
        Ok(BinaryWriter {
            zstd,
            buf: Vec::with_capacity(CHUNK_LEN + 1024),
            base: DeltaBase::default(),
            count: 0,
        })
    }

    /// Encodes one entry; an entry outside the format's limits (e.g. a write of 65 bytes) is
    /// an `InvalidInput` error, so that every written trace decodes.
    pub fn write(&mut self, entry: &Entry) -> io::Result<()> {
        entry
            .validate()
            .map_err(|problem| io::Error::new(io::ErrorKind::InvalidInput, problem))?;
        encode_entry(&mut self.buf, &mut self.base, entry);
        self.count += 1;
        if self.buf.len() >= CHUNK_LEN {
            self.zstd.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes the end marker, ends the zstd frame and returns the flushed writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.buf.push(tags::END);
        put_uvarint(&mut self.buf, self.count);
        self.zstd.write_all(&self.buf)?;
        let mut w = self.zstd.finish()?;
        w.flush()?;
        Ok(w)
    }
}

fn encode_entry(buf: &mut Vec<u8>, base: &mut DeltaBase, entry: &Entry) {
    let meta_flag = if entry.meta.is_empty() { 0 } else { tags::META };
    let mut pm_addr = |buf: &mut Vec<u8>, addr: u64| {
        put_uvarint(buf, delta(base.pm_addr, addr));
        base.pm_addr = addr;
    };
    match &entry.op {
        Op::Write { addr, data, nt } => {
            buf.push(if *nt { tags::NTWRITE } else { tags::WRITE } | meta_flag);
            pm_addr(buf, *addr);
            put_uvarint(buf, data.len() as u64);
            buf.extend_from_slice(data);
        }
        Op::Read { addr, size } => {
            buf.push(tags::READ | meta_flag);
            pm_addr(buf, *addr);
            put_uvarint(buf, *size);
        }
        Op::Flush { kind, addr } => {
            buf.push(
                match kind {
                    FlushKind::Clwb => tags::FLUSH_CLWB,
                    FlushKind::Clflushopt => tags::FLUSH_CLFLUSHOPT,
                    FlushKind::Clflush => tags::FLUSH_CLFLUSH,
                } | meta_flag,
            );
            pm_addr(buf, *addr);
        }
        Op::Fence(kind) => buf.push(
            match kind {
                FenceKind::Sfence => tags::FENCE_SFENCE,
                FenceKind::Mfence => tags::FENCE_MFENCE,
                FenceKind::Locked => tags::FENCE_LOCKED,
                FenceKind::Serializing => tags::FENCE_SERIALIZING,
                FenceKind::Interrupt => tags::FENCE_INTERRUPT,
            } | meta_flag,
        ),
        Op::Hypercall(Hypercall::Checkpoint(n)) => {
            buf.push(tags::HYPERCALL_CHECKPOINT | meta_flag);
            put_uvarint(buf, *n);
        }
        Op::Hypercall(Hypercall::Start) => buf.push(tags::HYPERCALL_START | meta_flag),
        Op::Hypercall(Hypercall::Success) => buf.push(tags::HYPERCALL_SUCCESS | meta_flag),
        Op::Hypercall(Hypercall::Fail) => buf.push(tags::HYPERCALL_FAIL | meta_flag),
        Op::Hypercall(Hypercall::Volatile { addr, len }) => {
            buf.push(tags::HYPERCALL_VOLATILE | meta_flag);
            put_uvarint(buf, *addr);
            put_uvarint(buf, *len);
        }
        Op::BlkWrite { offset, data } => {
            buf.push(tags::BLK_WRITE | meta_flag);
            put_uvarint(buf, delta(base.blk_offset, *offset));
            base.blk_offset = *offset;
            put_uvarint(buf, data.len() as u64 / BLOCK_SIZE);
            buf.extend_from_slice(data);
        }
        Op::BlkRead { offset, size } => {
            buf.push(tags::BLK_READ | meta_flag);
            put_uvarint(buf, delta(base.blk_offset, *offset));
            base.blk_offset = *offset;
            put_uvarint(buf, *size);
        }
        Op::BlkFlush => buf.push(tags::BLK_FLUSH | meta_flag),
        Op::Call { name, args } => {
            buf.push(tags::CALL | meta_flag);
            put_name(buf, name);
            put_uvarint(buf, args.len() as u64);
            for arg in args {
                put_arg(buf, arg);
            }
        }
        Op::Return { name, value } => {
            buf.push(tags::RETURN | meta_flag);
            put_name(buf, name);
            put_arg(buf, value);
        }
    }
    if meta_flag != 0 {
        encode_meta(buf, base, &entry.meta);
    }
}

/// The pc is a delta against the last pc encoded; the first stack frame against the pc
/// (this entry's, if it has one), every further frame against the frame before it.
fn encode_meta(buf: &mut Vec<u8>, base: &mut DeltaBase, meta: &Meta) {
    let fields = if meta.pc.is_some() { tags::META_PC } else { 0 }
        | if meta.stack.is_empty() {
            0
        } else {
            tags::META_STACK
        }
        | if meta.task.is_some() {
            tags::META_TASK
        } else {
            0
        };
    buf.push(fields);
    if let Some(pc) = meta.pc {
        put_uvarint(buf, delta(base.pc, pc));
        base.pc = pc;
    }
    if !meta.stack.is_empty() {
        put_uvarint(buf, meta.stack.len() as u64);
        let mut prev = base.pc;
        for &frame in &meta.stack {
            put_uvarint(buf, delta(prev, frame));
            prev = frame;
        }
    }
    if let Some(task) = &meta.task {
        put_uvarint(buf, task.pid.into());
        put_uvarint(buf, task.tid.into());
        put_uvarint(buf, task.comm.len() as u64);
        buf.extend_from_slice(task.comm.as_bytes());
    }
}

/// Writes `entries` as a binary trace file at `path`, whole or not at all (a temporary
/// file, synced and renamed); returns the entry count. An entry that fails to read is
/// returned as the error, and nothing is left at `path`.
pub fn write_binary_file(
    path: &std::path::Path,
    header: &Header,
    entries: impl Iterator<Item = Result<Entry, crate::TraceError>>,
) -> Result<u64, crate::TraceError> {
    let mut count = 0u64;
    let mut failure = None;
    let written = crate::atomic_file::create_atomically(path, |file| {
        let mut writer = BinaryWriter::new(io::BufWriter::new(file), header)?;
        for entry in entries {
            match entry {
                Ok(entry) => writer.write(&entry)?,
                Err(e) => {
                    failure = Some(e);
                    return Err(io::Error::other("reading the entries failed"));
                }
            }
            count += 1;
        }
        writer
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()
    });
    match failure {
        Some(e) => Err(e),
        None => written.map(|()| count).map_err(crate::TraceError::from),
    }
}

/// A call's or return's function name: its length, then its bytes.
fn put_name(buf: &mut Vec<u8>, name: &str) {
    put_uvarint(buf, name.len() as u64);
    buf.extend_from_slice(name.as_bytes());
}

/// An argument or return value: its kind byte, then its value.
fn put_arg(buf: &mut Vec<u8>, arg: &Arg) {
    let (kind, value) = match arg {
        Arg::Value(v) => (tags::ARG_VALUE, v),
        Arg::Pm(offset) => (tags::ARG_PM, offset),
    };
    buf.push(kind);
    put_uvarint(buf, *value);
}
