//! Streaming decoder. Every length read from the stream is checked against the format's
//! limits before anything is allocated for it, and data is copied as it arrives, so a
//! corrupt trace costs at most one entry's worth of memory.

use std::io::{BufRead, Read};

use crate::binary::tags;
use crate::binary::varint::{undelta, DeltaBase};
use crate::entry::{
    Arg, Entry, FenceKind, FlushKind, Header, Hypercall, Meta, Op, Task, BLOCK_SIZE,
    MAX_BLK_WRITE_LEN, MAX_CALL_ARGS, MAX_CALL_NAME_LEN, MAX_COMM_LEN, MAX_STACK_DEPTH,
    MAX_WRITE_LEN,
};
use crate::error::{TraceError, TraceErrorKind};

type Zstd = zstd::stream::read::Decoder<'static, Box<dyn BufRead + Send>>;

const BUF_LEN: usize = 64 * 1024;

/// The decompressed entry stream, read through a buffer of its own so that decoding a byte
/// is an index into a slice, and positions are known for error messages.
struct EntryStream {
    zstd: Zstd,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// Stream offset of `buf[0]`.
    buf_offset: u64,
}

impl EntryStream {
    fn offset(&self) -> u64 {
        self.buf_offset + self.pos as u64
    }

    /// Refills the buffer; false at the end of the stream.
    fn refill(&mut self) -> Result<bool, String> {
        self.buf_offset += self.len as u64;
        self.pos = 0;
        self.len = 0;
        loop {
            match self.zstd.read(&mut self.buf) {
                Ok(n) => {
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("cannot decompress the entry stream: {e}")),
            }
        }
    }

    fn byte(&mut self) -> Result<u8, String> {
        if self.pos == self.len && !self.refill()? {
            return Err("the stream ends inside the entry (truncated trace?)".to_owned());
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    fn at_end(&mut self) -> Result<bool, String> {
        Ok(self.pos == self.len && !self.refill()?)
    }

    fn uvarint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a number is longer than 64 bits".to_owned())
    }

    /// Reads `len` bytes; the caller has checked `len` against the format's limits.
    fn bytes(&mut self, len: usize) -> Result<Vec<u8>, String> {
        let mut data = Vec::with_capacity(len.min(BUF_LEN));
        while data.len() < len {
            if self.pos == self.len && !self.refill()? {
                return Err(format!(
                    "the stream ends after {} of {len} data bytes (truncated trace?)",
                    data.len()
                ));
            }
            let take = (len - data.len()).min(self.len - self.pos);
            data.extend_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
        }
        Ok(data)
    }
}

pub(crate) struct BinaryReader {
    stream: EntryStream,
    header: Header,
    base: DeltaBase,
    /// Index of the next entry.
    index: u64,
    ended: bool,
}

impl BinaryReader {
    /// `input` is positioned just after the header.
    pub(crate) fn new(input: Box<dyn BufRead + Send>, header: Header) -> Result<Self, TraceError> {
        let mut zstd = Zstd::with_buffer(input)?.single_frame();
        zstd.window_log_max(tags::ZSTD_WINDOW_LOG)?;
        Ok(BinaryReader {
            stream: EntryStream {
                zstd,
                buf: vec![0; BUF_LEN].into_boxed_slice(),
                pos: 0,
                len: 0,
                buf_offset: 0,
            },
            header,
            base: DeltaBase::default(),
            index: 0,
            ended: false,
        })
    }

    pub(crate) fn header(&self) -> Header {
        self.header
    }

    fn pm_addr(&mut self) -> Result<u64, String> {
        self.base.pm_addr = undelta(self.base.pm_addr, self.stream.uvarint()?);
        Ok(self.base.pm_addr)
    }

    fn blk_offset(&mut self) -> Result<u64, String> {
        self.base.blk_offset = undelta(self.base.blk_offset, self.stream.uvarint()?);
        Ok(self.base.blk_offset)
    }

    /// `None` at the end marker.
    fn decode_entry(&mut self) -> Result<Option<Entry>, String> {
        let tag = self.stream.byte()?;
        if tag == tags::END {
            self.check_end()?;
            return Ok(None);
        }
        let op = match tag & !tags::META {
            tags::WRITE | tags::NTWRITE => {
                let addr = self.pm_addr()?;
                let len = self.stream.uvarint()?;
                if len == 0 || len > MAX_WRITE_LEN as u64 {
                    return Err(format!("write length {len} is outside 1..={MAX_WRITE_LEN}"));
                }
                Op::Write {
                    addr,
                    data: self.stream.bytes(len as usize)?,
                    nt: tag & !tags::META == tags::NTWRITE,
                }
            }
            tags::READ => Op::Read {
                addr: self.pm_addr()?,
                size: self.stream.uvarint()?,
            },
            tags::FLUSH_CLWB => self.flush(FlushKind::Clwb)?,
            tags::FLUSH_CLFLUSHOPT => self.flush(FlushKind::Clflushopt)?,
            tags::FLUSH_CLFLUSH => self.flush(FlushKind::Clflush)?,
            tags::FENCE_SFENCE => Op::Fence(FenceKind::Sfence),
            tags::FENCE_MFENCE => Op::Fence(FenceKind::Mfence),
            tags::FENCE_LOCKED => Op::Fence(FenceKind::Locked),
            tags::FENCE_SERIALIZING => Op::Fence(FenceKind::Serializing),
            tags::FENCE_INTERRUPT => Op::Fence(FenceKind::Interrupt),
            tags::HYPERCALL_START => Op::Hypercall(Hypercall::Start),
            tags::HYPERCALL_CHECKPOINT => {
                Op::Hypercall(Hypercall::Checkpoint(self.stream.uvarint()?))
            }
            tags::HYPERCALL_SUCCESS => Op::Hypercall(Hypercall::Success),
            tags::HYPERCALL_FAIL => Op::Hypercall(Hypercall::Fail),
            tags::HYPERCALL_VOLATILE => Op::Hypercall(Hypercall::Volatile {
                addr: self.stream.uvarint()?,
                len: self.stream.uvarint()?,
            }),
            tags::BLK_WRITE => {
                let offset = self.blk_offset()?;
                let blocks = self.stream.uvarint()?;
                let len = blocks
                    .checked_mul(BLOCK_SIZE)
                    .filter(|&len| len <= MAX_BLK_WRITE_LEN as u64)
                    .ok_or_else(|| {
                        format!(
                            "block write of {blocks} blocks is longer than {MAX_BLK_WRITE_LEN} \
                             bytes"
                        )
                    })?;
                Op::BlkWrite {
                    offset,
                    data: self.stream.bytes(len as usize)?,
                }
            }
            tags::BLK_READ => Op::BlkRead {
                offset: self.blk_offset()?,
                size: self.stream.uvarint()?,
            },
            tags::BLK_FLUSH => Op::BlkFlush,
            tags::CALL => self.call()?,
            tags::RETURN => Op::Return {
                name: self.function_name()?,
                value: self.arg()?,
            },
            _ => return Err(format!("unknown tag {tag:#04x}")),
        };
        let meta = if tag & tags::META != 0 {
            self.decode_meta()?
        } else {
            Meta::default()
        };
        let entry = Entry { op, meta };
        entry.validate()?;
        Ok(Some(entry))
    }

    fn function_name(&mut self) -> Result<String, String> {
        let len = self.stream.uvarint()?;
        if len == 0 || len > MAX_CALL_NAME_LEN as u64 {
            return Err(format!(
                "call name length {len} is outside 1..={MAX_CALL_NAME_LEN}"
            ));
        }
        String::from_utf8(self.stream.bytes(len as usize)?)
            .map_err(|_| "a call's name is not UTF-8".to_owned())
    }

    fn arg(&mut self) -> Result<Arg, String> {
        let kind = self.stream.byte()?;
        let value = self.stream.uvarint()?;
        match kind {
            tags::ARG_VALUE => Ok(Arg::Value(value)),
            tags::ARG_PM => Ok(Arg::Pm(value)),
            _ => Err(format!("unknown call argument kind {kind}")),
        }
    }

    fn call(&mut self) -> Result<Op, String> {
        let name = self.function_name()?;
        let count = self.stream.uvarint()?;
        if count > MAX_CALL_ARGS as u64 {
            return Err(format!(
                "a call has at most {MAX_CALL_ARGS} arguments, not {count}"
            ));
        }
        let args = (0..count)
            .map(|_| self.arg())
            .collect::<Result<_, String>>()?;
        Ok(Op::Call { name, args })
    }

    fn flush(&mut self, kind: FlushKind) -> Result<Op, String> {
        Ok(Op::Flush {
            kind,
            addr: self.pm_addr()?,
        })
    }

    fn decode_meta(&mut self) -> Result<Meta, String> {
        let fields = self.stream.byte()?;
        if fields & !(tags::META_PC | tags::META_STACK | tags::META_TASK) != 0 || fields == 0 {
            return Err(format!("bad metadata field bits {fields:#04x}"));
        }
        let mut meta = Meta::default();
        if fields & tags::META_PC != 0 {
            self.base.pc = undelta(self.base.pc, self.stream.uvarint()?);
            meta.pc = Some(self.base.pc);
        }
        if fields & tags::META_STACK != 0 {
            let depth = self.stream.uvarint()?;
            if depth == 0 || depth > MAX_STACK_DEPTH as u64 {
                return Err(format!(
                    "stack depth {depth} is outside 1..={MAX_STACK_DEPTH}"
                ));
            }
            let mut prev = self.base.pc;
            for _ in 0..depth {
                prev = undelta(prev, self.stream.uvarint()?);
                meta.stack.push(prev);
            }
        }
        if fields & tags::META_TASK != 0 {
            meta.task = Some(self.task()?);
        }
        Ok(meta)
    }

    fn task(&mut self) -> Result<Task, String> {
        let id = |n: u64, what: &str| {
            u32::try_from(n).map_err(|_| format!("{what} {n} does not fit in 32 bits"))
        };
        let pid = id(self.stream.uvarint()?, "pid")?;
        let tid = id(self.stream.uvarint()?, "tid")?;
        let len = self.stream.uvarint()?;
        if len > MAX_COMM_LEN as u64 {
            return Err(format!(
                "task name length {len} is longer than {MAX_COMM_LEN}"
            ));
        }
        let comm = String::from_utf8(self.stream.bytes(len as usize)?)
            .map_err(|_| "task name is not UTF-8".to_owned())?;
        Ok(Task { pid, tid, comm })
    }

    /// The end marker holds the number of entries, and nothing may follow it.
    fn check_end(&mut self) -> Result<(), String> {
        let count = self.stream.uvarint()?;
        if count != self.index {
            return Err(format!(
                "the end marker counts {count} entries but the stream holds {}",
                self.index
            ));
        }
        if !self.stream.at_end()? {
            return Err("data follows the end marker".to_owned());
        }
        Ok(())
    }
}

impl Iterator for BinaryReader {
    type Item = Result<Entry, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        let start = self.stream.offset();
        match self.decode_entry() {
            Ok(Some(entry)) => {
                self.index += 1;
                Some(Ok(entry))
            }
            Ok(None) => {
                self.ended = true;
                None
            }
            Err(problem) => {
                self.ended = true;
                Some(Err(TraceError::new(TraceErrorKind::Corrupt {
                    index: self.index,
                    offset: start,
                    problem,
                })))
            }
        }
    }
}
