//! Block-device entries from the guest's own NVMe commands, without a patched QEMU.
//!
//! QEMU's plugin API cannot hook the NVMe device model, but the plugin sees every store
//! the guest makes to the controller's registers, and can read guest memory. So the
//! decoder follows the driver's side of the protocol (NVMe base specification 1.4,
//! sections 3.1 and 4): the admin queue's address (`AQA`/`ASQ`/`ACQ`), the I/O queues the
//! admin commands create, and at each submission-queue tail doorbell the commands
//! submitted since the last one, with their data read from the pages their PRPs name. At
//! each completion-queue head doorbell it reads which commands the driver has taken as
//! completed. What that ordering means for the crash model is in docs/design/tracer.md
//! ("Block devices").

use crate::physical::PhysMemory;
use persim_trace::{Op, MAX_BLK_WRITE_LEN};
use std::collections::{HashMap, HashSet};

/// The controller's memory page size: Linux sets `CC.MPS` to 4 KiB.
const PAGE: u64 = 4096;
/// Register offsets (base specification, "Controller Registers").
const CC: u64 = 0x14;
const AQA: u64 = 0x24;
const ASQ: u64 = 0x28;
const ACQ: u64 = 0x30;
const DOORBELLS: u64 = 0x1000;
/// QEMU's controller has a doorbell stride of 4 bytes (`CAP.DSTRD` = 0).
const DOORBELL_STRIDE: u64 = 4;
const SQ_ENTRY: u64 = 64;
const CQ_ENTRY: u64 = 16;

/// Opcodes (admin and NVM command sets).
const ADMIN_DELETE_SQ: u8 = 0x00;
const ADMIN_CREATE_SQ: u8 = 0x01;
const ADMIN_DELETE_CQ: u8 = 0x04;
const ADMIN_CREATE_CQ: u8 = 0x05;
const NVM_FLUSH: u8 = 0x00;
const NVM_WRITE: u8 = 0x01;
const NVM_READ: u8 = 0x02;
const NVM_WRITE_ZEROES: u8 = 0x08;
const NVM_DATASET_MANAGEMENT: u8 = 0x09;
/// Dataset Management's Deallocate attribute (CDW11 bit 2); the other bits are hints.
const DEALLOCATE: u32 = 1 << 2;
/// A Dataset Management range: context attributes (u32), length in blocks (u32, not
/// 0-based), starting block (u64).
const DSM_RANGE: usize = 16;

#[derive(Clone, Copy, Debug, Default)]
struct Queue {
    base: u64,
    entries: u64,
    /// The next entry the decoder has not read yet (the last tail or head seen).
    next: u64,
}

/// Follows one controller's queues; feed it the guest's register stores.
pub struct NvmeDecoder {
    lba_size: u64,
    reads: bool,
    /// Submission queues by id (0 is the admin queue), and completion queues by id.
    sqs: HashMap<u16, Queue>,
    cqs: HashMap<u16, Queue>,
    /// Queue sizes and addresses written to `AQA`, `ASQ` and `ACQ`, used at enable.
    aqa: u32,
    asq: u64,
    acq: u64,
    /// Flushes and writes with Force Unit Access in flight, by (submission queue,
    /// command id): each becomes a `blkflush` when the driver takes it as completed (for
    /// a forced write that is more than the device promises: docs/design/tracer.md).
    durable_at_completion: HashSet<(u16, u16)>,
    /// What could not be decoded since the caller last took them, for it to report.
    pub problems: Vec<String>,
    /// Whether the decoder has seen the controller enabled: before that, queues are
    /// unknown by design (a reset right after `hypercall start` shows them).
    enabled_once: bool,
}

impl NvmeDecoder {
    /// `lba_size`: the namespace's logical block size (the VM configures it).
    pub fn new(lba_size: u64, reads: bool) -> NvmeDecoder {
        NvmeDecoder {
            lba_size,
            reads,
            sqs: HashMap::new(),
            cqs: HashMap::new(),
            aqa: 0,
            asq: 0,
            acq: 0,
            durable_at_completion: HashSet::new(),
            problems: Vec::new(),
            enabled_once: false,
        }
    }

    /// A store of `size` bytes of `value` at `offset` into the controller's registers;
    /// returns the block entries it implies, in order.
    pub fn register_write(
        &mut self,
        offset: u64,
        value: u64,
        size: u64,
        mem: &mut impl PhysMemory,
    ) -> Vec<Op> {
        let mut ops = Vec::new();
        match (offset, size) {
            (CC, _) => self.configure(value as u32 & 1 == 1),
            (AQA, _) => self.aqa = value as u32,
            (ASQ, 8) => self.asq = value,
            (ASQ, _) => self.asq = self.asq & !0xffff_ffff | (value & 0xffff_ffff),
            (o, 4) if o == ASQ + 4 => self.asq = self.asq & 0xffff_ffff | value << 32,
            (ACQ, 8) => self.acq = value,
            (ACQ, _) => self.acq = self.acq & !0xffff_ffff | (value & 0xffff_ffff),
            (o, 4) if o == ACQ + 4 => self.acq = self.acq & 0xffff_ffff | value << 32,
            (o, _) if o >= DOORBELLS => {
                let index = (o - DOORBELLS) / DOORBELL_STRIDE;
                let qid = (index / 2) as u16;
                if index.is_multiple_of(2) {
                    self.submitted(qid, value, mem, &mut ops);
                } else {
                    self.completed(qid, value, mem, &mut ops);
                }
            }
            _ => {}
        }
        ops
    }

    /// `CC.EN` written: enabling starts the admin queues, disabling (a reset) ends all.
    fn configure(&mut self, enable: bool) {
        self.sqs.clear();
        self.cqs.clear();
        self.durable_at_completion.clear();
        if enable {
            self.enabled_once = true;
            let sq_entries = u64::from(self.aqa & 0xfff) + 1;
            let cq_entries = u64::from(self.aqa >> 16 & 0xfff) + 1;
            self.sqs.insert(0, queue(self.asq, sq_entries));
            self.cqs.insert(0, queue(self.acq, cq_entries));
        }
    }

    fn submitted(&mut self, qid: u16, tail: u64, mem: &mut impl PhysMemory, ops: &mut Vec<Op>) {
        let Some(sq) = self.sqs.get_mut(&qid) else {
            return self.unknown("submission", qid);
        };
        for (index, entry) in sq.advance::<{ SQ_ENTRY as usize }>(tail, mem) {
            match entry {
                None => self.problem(format!("cannot read submission queue {qid} entry {index}")),
                Some(entry) if qid == 0 => self.admin_command(&Command(entry)),
                Some(entry) => self.io_command(qid, &Command(entry), mem, ops),
            }
        }
    }

    fn admin_command(&mut self, cmd: &Command) {
        let qid = cmd.dword(10) as u16;
        let entries = u64::from(cmd.dword(10) >> 16) + 1;
        match cmd.opcode() {
            ADMIN_CREATE_SQ => {
                self.sqs.insert(qid, queue(cmd.prp1(), entries));
            }
            ADMIN_CREATE_CQ => {
                self.cqs.insert(qid, queue(cmd.prp1(), entries));
            }
            ADMIN_DELETE_SQ => {
                self.sqs.remove(&qid);
            }
            ADMIN_DELETE_CQ => {
                self.cqs.remove(&qid);
            }
            _ => {}
        }
    }

    fn io_command(
        &mut self,
        qid: u16,
        cmd: &Command,
        mem: &mut impl PhysMemory,
        ops: &mut Vec<Op>,
    ) {
        let offset = cmd.qword(10) * self.lba_size;
        let len = (u64::from(cmd.dword(12) & 0xffff) + 1) * self.lba_size;
        let opcode = cmd.opcode();
        let deallocates = opcode == NVM_DATASET_MANAGEMENT && cmd.dword(11) & DEALLOCATE != 0;
        if cmd.dword(0) >> 14 & 3 != 0 && (matches!(opcode, NVM_WRITE | NVM_READ) || deallocates) {
            // The VM turns scatter-gather lists off (`nvme.sgl_threshold=0`).
            self.problem(format!("command {opcode:#x} with an SGL is not decoded"));
            return;
        }
        match opcode {
            NVM_FLUSH => {
                self.durable_at_completion.insert((qid, cmd.id()));
            }
            NVM_WRITE => match read_prps(mem, cmd.prp1(), cmd.prp2(), len) {
                Some(data) => {
                    ops.push(Op::BlkWrite { offset, data });
                    if cmd.dword(12) >> 30 & 1 == 1 {
                        self.durable_at_completion.insert((qid, cmd.id()));
                    }
                }
                None => self.problem(format!("cannot read the data of a write at {offset:#x}")),
            },
            NVM_WRITE_ZEROES => zeros(offset, len, ops),
            NVM_DATASET_MANAGEMENT if deallocates => self.deallocate(cmd, mem, ops),
            NVM_READ if self.reads => ops.push(Op::BlkRead { offset, size: len }),
            _ => {}
        }
    }

    /// Dataset Management with Deallocate: each range becomes a write of zeros, what
    /// QEMU's controller then reads back (DLFEAT, docs/design/tracer.md "Block devices").
    fn deallocate(&mut self, cmd: &Command, mem: &mut impl PhysMemory, ops: &mut Vec<Op>) {
        let ranges = (cmd.dword(10) & 0xff) as usize + 1;
        let len = (ranges * DSM_RANGE) as u64;
        let Some(list) = read_prps(mem, cmd.prp1(), cmd.prp2(), len) else {
            return self.problem(format!("cannot read the {ranges} ranges of a deallocation"));
        };
        for range in list.chunks_exact(DSM_RANGE) {
            let blocks = u32::from_le_bytes(range[4..8].try_into().unwrap());
            let start = u64::from_le_bytes(range[8..16].try_into().unwrap());
            zeros(
                start * self.lba_size,
                u64::from(blocks) * self.lba_size,
                ops,
            );
        }
    }

    fn completed(&mut self, qid: u16, head: u64, mem: &mut impl PhysMemory, ops: &mut Vec<Op>) {
        let Some(cq) = self.cqs.get_mut(&qid) else {
            return self.unknown("completion", qid);
        };
        for (index, entry) in cq.advance::<{ CQ_ENTRY as usize }>(head, mem) {
            let Some(entry) = entry else {
                self.problem(format!("cannot read completion queue {qid} entry {index}"));
                continue;
            };
            let sqid = u16::from_le_bytes([entry[10], entry[11]]);
            let cid = u16::from_le_bytes([entry[12], entry[13]]);
            let failed = u16::from_le_bytes([entry[14], entry[15]]) >> 1 != 0;
            // A failed flush makes nothing durable; a failed write stays pending.
            if self.durable_at_completion.remove(&(sqid, cid)) && !failed {
                ops.push(Op::BlkFlush);
            }
        }
    }

    /// A doorbell of a queue the decoder does not know: expected before the controller
    /// was first seen enabled.
    fn unknown(&mut self, kind: &str, qid: u16) {
        if self.enabled_once {
            self.problem(format!("doorbell of unknown {kind} queue {qid}"));
        }
    }

    fn problem(&mut self, message: String) {
        self.problems.push(message);
    }
}

impl Queue {
    /// The entries from the last one seen up to `to` (a doorbell's new tail or head), with
    /// their positions, `None` for one that cannot be read; `to` becomes the last seen.
    fn advance<const N: usize>(
        &mut self,
        to: u64,
        mem: &mut impl PhysMemory,
    ) -> Vec<(u64, Option<[u8; N]>)> {
        let mut entries = Vec::new();
        while self.next != to % self.entries {
            let mut entry = [0u8; N];
            let read = mem.read(self.base + self.next * N as u64, &mut entry);
            entries.push((self.next, read.then_some(entry)));
            self.next = (self.next + 1) % self.entries;
        }
        entries
    }
}

/// Zeros over `len` bytes at `offset`, in writes no longer than a trace holds (Write Zeroes
/// covers up to 32 MiB, a deallocated range up to the whole disk).
fn zeros(offset: u64, len: u64, ops: &mut Vec<Op>) {
    let max = MAX_BLK_WRITE_LEN as u64;
    for at in (0..len).step_by(max as usize) {
        ops.push(Op::BlkWrite {
            offset: offset + at,
            data: vec![0; (len - at).min(max) as usize],
        });
    }
}

fn queue(base: u64, entries: u64) -> Queue {
    Queue {
        base,
        entries: entries.max(1),
        next: 0,
    }
}

/// A submission-queue entry.
struct Command([u8; SQ_ENTRY as usize]);

impl Command {
    fn dword(&self, n: usize) -> u32 {
        u32::from_le_bytes(self.0[n * 4..n * 4 + 4].try_into().unwrap())
    }
    fn qword(&self, n: usize) -> u64 {
        u64::from(self.dword(n)) | u64::from(self.dword(n + 1)) << 32
    }
    fn opcode(&self) -> u8 {
        self.0[0]
    }
    fn id(&self) -> u16 {
        (self.dword(0) >> 16) as u16
    }
    fn prp1(&self) -> u64 {
        self.qword(6)
    }
    fn prp2(&self) -> u64 {
        self.qword(8)
    }
}

/// The `len` bytes a command's PRP entries name: PRP1 (which may start inside a page),
/// then PRP2 as the second page, or as a list of pages whose last entry chains to the
/// next list when more pages follow.
fn read_prps(mem: &mut impl PhysMemory, prp1: u64, prp2: u64, len: u64) -> Option<Vec<u8>> {
    let mut pages = vec![(prp1, (PAGE - prp1 % PAGE).min(len))];
    let mut left = len - pages[0].1;
    if left > 0 && left <= PAGE {
        pages.push((prp2, left));
    } else if left > 0 {
        let mut list = prp2;
        while left > 0 {
            let mut raw = [0u8; 8];
            let last_in_list = list % PAGE == PAGE - 8;
            if !mem.read(list, &mut raw) {
                return None;
            }
            let entry = u64::from_le_bytes(raw);
            if last_in_list && left > PAGE {
                list = entry;
                continue;
            }
            let chunk = left.min(PAGE);
            pages.push((entry, chunk));
            left -= chunk;
            list += 8;
        }
    }
    let mut data = vec![0u8; len as usize];
    let mut at = 0;
    for (addr, chunk) in pages {
        let end = at + chunk as usize;
        if !mem.read(addr, &mut data[at..end]) {
            return None;
        }
        at = end;
    }
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Memory = crate::physical::fake::SparseMemory;

    const ADMIN_SQ: u64 = 0x10_0000;
    const ADMIN_CQ: u64 = 0x11_0000;
    const IO_SQ: u64 = 0x20_0000;
    const IO_CQ: u64 = 0x21_0000;

    /// A controller as Linux brings it up: admin queues of 32 entries, one I/O queue pair
    /// of 8 entries (small, so that the tests wrap around).
    struct Driver {
        nvme: NvmeDecoder,
        mem: Memory,
        sq_tail: [u64; 2],
        cq_head: [u64; 2],
        next_id: u16,
    }

    fn entry(opcode: u8, id: u16, dwords: &[(usize, u32)]) -> [u8; 64] {
        let mut e = [0u8; 64];
        e[0] = opcode;
        e[2..4].copy_from_slice(&id.to_le_bytes());
        for (n, v) in dwords {
            e[n * 4..n * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        e
    }

    impl Driver {
        fn new(reads: bool) -> Driver {
            let mut d = Driver {
                nvme: NvmeDecoder::new(512, reads),
                mem: Memory::default(),
                sq_tail: [0; 2],
                cq_head: [0; 2],
                next_id: 1,
            };
            d.reg(CC, 0, 4);
            d.reg(AQA, 31 << 16 | 31, 4);
            d.reg(ASQ, ADMIN_SQ & 0xffff_ffff, 4);
            d.reg(ASQ + 4, ADMIN_SQ >> 32, 4);
            d.reg(ACQ, ADMIN_CQ, 8);
            d.reg(CC, 1, 4);
            d.submit(
                0,
                entry(ADMIN_CREATE_CQ, 1, &[(6, IO_CQ as u32), (10, 7 << 16 | 1)]),
            );
            d.submit(
                0,
                entry(ADMIN_CREATE_SQ, 2, &[(6, IO_SQ as u32), (10, 7 << 16 | 1)]),
            );
            d
        }

        fn reg(&mut self, offset: u64, value: u64, size: u64) -> Vec<Op> {
            self.nvme.register_write(offset, value, size, &mut self.mem)
        }

        fn submit(&mut self, qid: usize, e: [u8; 64]) -> Vec<Op> {
            let (base, entries) = if qid == 0 { (ADMIN_SQ, 32) } else { (IO_SQ, 8) };
            self.mem.put(base + self.sq_tail[qid] * 64, &e);
            self.sq_tail[qid] = (self.sq_tail[qid] + 1) % entries;
            let tail = self.sq_tail[qid];
            self.reg(DOORBELLS + 8 * qid as u64, tail, 4)
        }

        /// Submits a write of `data` (whole 512-byte blocks) at block `lba` from the
        /// pages `prps` (the first may start inside a page); returns its command id.
        fn write(
            &mut self,
            lba: u64,
            data: &[u8],
            first: u64,
            prp2: u64,
            fua: bool,
        ) -> (u16, Vec<Op>) {
            let id = self.next_id;
            self.next_id += 1;
            let nlb = (data.len() / 512 - 1) as u32;
            let dw12 = nlb | if fua { 1 << 30 } else { 0 };
            let e = entry(
                NVM_WRITE,
                id,
                &[
                    (6, first as u32),
                    (7, (first >> 32) as u32),
                    (8, prp2 as u32),
                    (10, lba as u32),
                    (12, dw12),
                ],
            );
            (id, self.submit(1, e))
        }

        /// The device completes commands `ids` of queue 1; the driver takes them.
        fn complete(&mut self, ids: &[(u16, u16)]) -> Vec<Op> {
            for (id, status) in ids {
                let mut cqe = [0u8; 16];
                cqe[10..12].copy_from_slice(&1u16.to_le_bytes());
                cqe[12..14].copy_from_slice(&id.to_le_bytes());
                cqe[14..16].copy_from_slice(&(status << 1 | 1).to_le_bytes());
                self.mem.put(IO_CQ + self.cq_head[1] * 16, &cqe);
                self.cq_head[1] = (self.cq_head[1] + 1) % 8;
            }
            let head = self.cq_head[1];
            self.reg(DOORBELLS + 8 + 4, head, 4)
        }
    }

    /// A Dataset Management range as the driver lays it out.
    fn range(context: u32, blocks: u32, start: u64) -> Vec<u8> {
        let mut r = context.to_le_bytes().to_vec();
        r.extend(blocks.to_le_bytes());
        r.extend(start.to_le_bytes());
        r
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    #[test]
    fn a_write_within_one_page_is_one_block_entry_with_its_data() {
        let mut d = Driver::new(false);
        let data = pattern(1024, 1);
        d.mem.put(0x30_0200, &data);
        let (_, ops) = d.write(5, &data, 0x30_0200, 0, false);
        assert_eq!(
            ops,
            vec![Op::BlkWrite {
                offset: 5 * 512,
                data
            }]
        );
    }

    #[test]
    fn prp2_is_the_second_page_or_a_chained_list_of_pages() {
        let mut d = Driver::new(false);
        // 8 KiB from inside a page: the first page's last 3.5 KiB, then PRP2's page.
        let two = pattern(4096 + 512, 2);
        d.mem.put(0x40_0200, &two[..3584]);
        d.mem.put(0x50_0000, &two[3584..]);
        let (_, ops) = d.write(0, &two, 0x40_0200, 0x50_0000, false);
        assert_eq!(
            ops,
            vec![Op::BlkWrite {
                offset: 0,
                data: two
            }]
        );
        // 5 pages after the first through a list whose last slot chains to a second list.
        let big = pattern(6 * 4096, 3);
        let pages: Vec<u64> = (0..6).map(|i| 0x60_0000 + i * 0x2000).collect();
        for (i, page) in pages.iter().enumerate() {
            d.mem.put(*page, &big[i * 4096..(i + 1) * 4096]);
        }
        let (list1, list2): (u64, u64) = (0x70_0000 + 4096 - 24, 0x71_0000);
        d.mem.put(list1, &pages[1].to_le_bytes());
        d.mem.put(list1 + 8, &pages[2].to_le_bytes());
        d.mem.put(list1 + 16, &list2.to_le_bytes());
        for (i, page) in pages[3..].iter().enumerate() {
            d.mem.put(list2 + 8 * i as u64, &page.to_le_bytes());
        }
        let (_, ops) = d.write(64, &big, pages[0], list1, false);
        assert_eq!(
            ops,
            vec![Op::BlkWrite {
                offset: 64 * 512,
                data: big
            }]
        );
    }

    #[test]
    fn flushes_and_forced_writes_become_durable_when_the_driver_takes_their_completion() {
        let mut d = Driver::new(false);
        let data = pattern(512, 4);
        d.mem.put(0x30_0000, &data);
        let (plain, _) = d.write(1, &data, 0x30_0000, 0, false);
        let (forced, ops) = d.write(2, &data, 0x30_0000, 0, true);
        assert_eq!(ops.len(), 1, "a forced write is a write at submission");
        let flush = d.next_id;
        d.next_id += 1;
        assert_eq!(d.submit(1, entry(NVM_FLUSH, flush, &[])), vec![]);
        assert_eq!(
            d.complete(&[(plain, 0)]),
            vec![],
            "a plain write's completion orders nothing"
        );
        assert_eq!(
            d.complete(&[(forced, 0), (flush, 0)]),
            vec![Op::BlkFlush, Op::BlkFlush]
        );
        // A failed flush makes nothing durable.
        let failed = d.next_id;
        d.submit(1, entry(NVM_FLUSH, failed, &[]));
        assert_eq!(d.complete(&[(failed, 0x6)]), vec![]);
    }

    #[test]
    fn queues_wrap_around_and_a_reset_forgets_them() {
        let mut d = Driver::new(true);
        for i in 0..10u16 {
            let e = entry(NVM_READ, 100 + i, &[(10, u32::from(i)), (12, 7)]);
            let ops = d.submit(1, e);
            let want = Op::BlkRead {
                offset: u64::from(i) * 512,
                size: 4096,
            };
            assert_eq!(ops, vec![want], "read {i}");
        }
        d.reg(CC, 0, 4);
        let ops = d.submit(1, entry(NVM_FLUSH, 1, &[]));
        assert_eq!(ops, vec![]);
        assert_eq!(
            d.nvme.problems,
            vec!["doorbell of unknown submission queue 1"]
        );
    }

    #[test]
    fn write_zeroes_is_a_write_of_zeros_and_sgl_commands_are_reported() {
        let mut d = Driver::new(false);
        let ops = d.submit(1, entry(NVM_WRITE_ZEROES, 9, &[(10, 3), (12, 1)]));
        assert_eq!(
            ops,
            vec![Op::BlkWrite {
                offset: 3 * 512,
                data: vec![0; 1024]
            }]
        );
        let mut sgl = entry(NVM_WRITE, 10, &[(12, 0)]);
        sgl[1] = 0x40;
        assert_eq!(d.submit(1, sgl), vec![]);
        assert_eq!(
            d.nvme.problems,
            vec!["command 0x1 with an SGL is not decoded"]
        );
    }

    #[test]
    fn deallocated_ranges_are_writes_of_zeros_and_hints_alone_are_nothing() {
        let mut d = Driver::new(false);
        // Two ranges (NR = 1), the second on PRP2's page: the list starts 16 bytes before
        // its first page ends. Context attributes are hints, not part of a range.
        let (list, second) = (0x30_0ff0u64, 0x50_0000u64);
        d.mem.put(list, &range(0x0300_0001, 3, 40));
        d.mem.put(second, &range(0x0300_0001, 8, 0x1_0000_0002));
        let dsm = |id, attributes| {
            entry(
                NVM_DATASET_MANAGEMENT,
                id,
                &[
                    (6, list as u32),
                    (8, second as u32),
                    (10, 1),
                    (11, attributes),
                ],
            )
        };
        assert_eq!(
            d.submit(1, dsm(20, DEALLOCATE)),
            vec![
                Op::BlkWrite {
                    offset: 40 * 512,
                    data: vec![0; 3 * 512]
                },
                Op::BlkWrite {
                    offset: 0x1_0000_0002 * 512,
                    data: vec![0; 8 * 512]
                }
            ]
        );
        // Integral Dataset for Read and Write (bits 0 and 1), without Deallocate.
        assert_eq!(d.submit(1, dsm(21, 0b11)), vec![]);
        assert!(d.nvme.problems.is_empty(), "{:?}", d.nvme.problems);
    }

    #[test]
    fn a_deallocation_longer_than_a_trace_holds_in_one_write_is_cut() {
        let mut d = Driver::new(false);
        // 40 MiB from block 8: writes of 16, 16 and 8 MiB.
        d.mem.put(0x30_0000, &range(0, (40 << 20) / 512, 8));
        let dsm = entry(
            NVM_DATASET_MANAGEMENT,
            22,
            &[(6, 0x30_0000), (10, 0), (11, DEALLOCATE)],
        );
        let writes: Vec<(u64, usize)> = d
            .submit(1, dsm)
            .into_iter()
            .map(|op| match op {
                Op::BlkWrite { offset, data } if data.iter().all(|&b| b == 0) => {
                    (offset, data.len())
                }
                other => panic!("not a write of zeros: {other:?}"),
            })
            .collect();
        let start = 8 * 512;
        assert_eq!(
            writes,
            [
                (start, 16 << 20),
                (start + (16 << 20), 16 << 20),
                (start + (32 << 20), 8 << 20)
            ]
        );
    }
}
