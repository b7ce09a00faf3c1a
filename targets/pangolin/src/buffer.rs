//! Micro-buffers: a transaction's DRAM copy of an object's data between two 64-bit
//! canaries, so that a write past either end of the data is caught before write-back.

const CANARY: u64 = 0x9e37_79b9_7f4a_7c15;

pub struct MicroBuffer {
    /// Canary, data (padded to a word), canary; words keep the data 8-byte aligned for C.
    words: Vec<u64>,
    pub size: u64,
    pub type_num: u32,
    /// The object's checksum as verified when opened (for new objects: unused).
    pub sum: u32,
    /// Data ranges the transaction changed, as `start..end`.
    pub modified: Vec<(u64, u64)>,
    /// Allocated by this transaction: written whole, checksum computed whole.
    pub new: bool,
}

impl MicroBuffer {
    pub fn new(oid: u64, data: &[u8], type_num: u32, sum: u32, new: bool) -> Self {
        let mut buffer = MicroBuffer {
            words: Vec::new(),
            size: 0,
            type_num,
            sum,
            // Room for a few ranges: a buffer made for an allocation and reused for an
            // update would otherwise allocate on its first `touch`.
            modified: Vec::with_capacity(4),
            new,
        };
        buffer.reuse(oid, data, type_num, sum, new);
        buffer
    }

    /// A buffer of `size` zero bytes, for an object the transaction allocates.
    pub fn zeroed(oid: u64, size: u64, type_num: u32) -> Self {
        let mut buffer = MicroBuffer::new(oid, &[], type_num, 0, true);
        buffer.reuse_zeroed(oid, size, type_num);
        buffer
    }

    /// This buffer's memory made into object `oid`'s buffer (as [`MicroBuffer::new`] makes
    /// one): a transaction reuses the buffers of the one before. The data is copied in,
    /// not zeroed first.
    pub fn reuse(&mut self, oid: u64, data: &[u8], type_num: u32, sum: u32, new: bool) {
        let inner = data.len().div_ceil(8);
        self.words.clear();
        self.words.reserve(inner + 2);
        self.words.push(CANARY ^ oid);
        // SAFETY: the capacity holds `inner` more words; the last one is zeroed before the
        // data is copied over its first bytes, so every word is initialised.
        unsafe {
            let dst = self.words.as_mut_ptr().add(1);
            if inner > 0 {
                dst.add(inner - 1).write(0);
            }
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst.cast::<u8>(), data.len());
            self.words.set_len(inner + 1);
        }
        self.words.push(CANARY ^ oid.rotate_left(32));
        self.size = data.len() as u64;
        (self.type_num, self.sum, self.new) = (type_num, sum, new);
        self.modified.clear();
    }

    /// As [`MicroBuffer::zeroed`], reusing this buffer's memory.
    pub fn reuse_zeroed(&mut self, oid: u64, size: u64, type_num: u32) {
        let inner = (size as usize).div_ceil(8);
        self.words.clear();
        self.words.resize(inner + 2, 0);
        self.words[0] = CANARY ^ oid;
        self.words[inner + 1] = CANARY ^ oid.rotate_left(32);
        self.size = size;
        (self.type_num, self.sum, self.new) = (type_num, 0, true);
        self.modified.clear();
    }

    /// Where the data starts; the front canary is the word before it.
    pub fn data_ptr(&mut self) -> *mut u8 {
        // SAFETY: word 1 exists (a buffer has at least two canary words around its data).
        unsafe { self.words.as_mut_ptr().add(1).cast() }
    }

    pub fn data(&self) -> &[u8] {
        // SAFETY: the data words follow word 0 and hold at least `size` bytes; any bytes
        // are valid u8.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().add(1).cast(), self.size as usize) }
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        let size = self.size as usize;
        // SAFETY: as for `data`, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), size) }
    }

    /// Whether both canaries of object `oid` are intact.
    pub fn canaries_hold(&self, oid: u64) -> bool {
        let last = self.words.len() - 1;
        self.words[0] == CANARY ^ oid && self.words[last] == CANARY ^ oid.rotate_left(32)
    }

    /// Marks data `start..end` changed.
    pub fn touch(&mut self, start: u64, end: u64) {
        // The maps open the same object again and again in one transaction.
        if self.modified.last() == Some(&(start, end)) {
            return;
        }
        self.modified.push((start, end));
    }

    /// The changed ranges, sorted and merged (in place).
    pub fn merged(&mut self) -> &[(u64, u64)] {
        // Most transactions change one range of an object: no sort.
        if self.modified.len() > 1 {
            self.modified.sort_unstable();
            let mut kept = 0;
            for k in 1..self.modified.len() {
                let (start, end) = self.modified[k];
                let last = &mut self.modified[kept];
                if start <= last.1 {
                    last.1 = last.1.max(end);
                } else {
                    kept += 1;
                    self.modified[kept] = (start, end);
                }
            }
            self.modified.truncate(kept + 1);
        }
        &self.modified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_canaries_guard_both_ends() {
        let mut buffer = MicroBuffer::new(64, &[7; 13], 1, 0, false);
        assert!(buffer.canaries_hold(64));
        assert!(!buffer.canaries_hold(128), "canaries are per object");
        for (start, end) in [(8, 10), (0, 2), (1, 4), (9, 13)] {
            buffer.touch(start, end);
        }
        assert_eq!(buffer.merged(), [(0, 4), (8, 13)]);
        let ptr = buffer.data_ptr();
        // SAFETY: the word before the data is the front canary, inside the allocation.
        unsafe { *ptr.sub(1) ^= 1 };
        assert!(!buffer.canaries_hold(64));
        let mut buffer = MicroBuffer::new(64, &[7; 13], 1, 0, false);
        let ptr = buffer.data_ptr();
        // SAFETY: 13 data bytes fill two words; byte 16 is the back canary's first.
        unsafe { *ptr.add(16) ^= 1 };
        assert!(!buffer.canaries_hold(64));
    }
}
