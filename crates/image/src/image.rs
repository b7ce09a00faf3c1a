//! `Image`: a fixed-length byte image with cheap clones, copy-on-write leaves and memoised
//! BLAKE3 hashing.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::diff::changed_blocks;
use crate::error::ImageError;
use crate::hash_tree::root_hash;
use crate::tree::{self, Node, Span};
use persim_trace::atomic_file::create_atomically;

/// Leaves of 32 chunks (32 KiB): the unit of copy-on-write and of re-hashing after a write.
pub const DEFAULT_HASH_LEVEL: u32 = 5;
/// Leaves of at most 1 GiB.
pub const MAX_HASH_LEVEL: u32 = 20;
const CHUNK_LEN: u64 = blake3::CHUNK_LEN as u64;

/// A fixed-length byte image.
///
/// Clones share all data and cost O(1); a write copies the leaves it touches (`1 KiB <<
/// hash_level` bytes each) and O(log n) small tree nodes. Unwritten zero ranges take no
/// memory. [`Image::hash`] is memoised per subtree, so hashing after a small write is cheap.
#[derive(Clone)]
pub struct Image {
    root: Arc<Node>,
    len: u64,
    level: u32,
}

impl Image {
    /// An all-zero image of `len` bytes with the default hash level.
    pub fn zeroed(len: u64) -> Image {
        Image {
            root: Arc::new(Node::zero()),
            len,
            level: DEFAULT_HASH_LEVEL,
        }
    }

    /// An image of `len` bytes holding the contents of the file at `path`, zero-padded if the
    /// file is shorter. A file longer than `len` is an error.
    pub fn from_file(path: impl AsRef<Path>, len: u64) -> io::Result<Image> {
        Image::from_files(&[(path.as_ref(), len)])
    }

    /// An image made of consecutive parts, each the contents of a file zero-padded to the
    /// part's length (a machine's PM, then its block device). A file longer than its part is
    /// an error.
    pub fn from_files(parts: &[(&Path, u64)]) -> io::Result<Image> {
        let mut image = Image::zeroed(parts.iter().map(|(_, len)| len).sum());
        let mut start = 0;
        for &(path, len) in parts {
            let context =
                |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
            let file = File::open(path).map_err(context)?;
            let file_len = file.metadata().map_err(context)?.len();
            if file_len > len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} has {file_len} bytes, more than the image size of {len} bytes; \
                         give the image size of at least the file size",
                        path.display()
                    ),
                ));
            }
            image.fill_from(file, start, file_len).map_err(context)?;
            start += len;
        }
        Ok(image)
    }

    /// Copies `len` bytes from `reader` to `start` leaf by leaf, leaving all-zero leaves
    /// unstored.
    fn fill_from(&mut self, mut reader: impl Read, start: u64, len: u64) -> io::Result<()> {
        let mut buf = vec![0; self.leaf_len() as usize];
        let mut offset = 0;
        while offset < len {
            // Leaf-aligned pieces in the image, wherever the part starts.
            let at = start + offset;
            let room = self.leaf_len() - at % self.leaf_len();
            let piece = &mut buf[..(len - offset).min(room) as usize];
            reader.read_exact(piece)?;
            if piece.iter().any(|&b| b != 0) {
                self.write(at, piece);
            }
            offset += piece.len() as u64;
        }
        Ok(())
    }

    /// The same bytes with leaves of `1 KiB << level`: smaller leaves make writes and
    /// re-hashing cheaper and the tree larger. Copies all non-zero data unless the level is
    /// unchanged.
    pub fn with_hash_level(self, level: u32) -> Result<Image, ImageError> {
        if level > MAX_HASH_LEVEL {
            return Err(ImageError::InvalidHashLevel { level });
        }
        if level == self.level {
            return Ok(self);
        }
        let mut image = Image {
            level,
            ..Image::zeroed(self.len)
        };
        self.for_each_changed_block(None, &mut |offset, bytes| {
            image.write(offset, bytes);
            Ok(())
        })
        .expect("writing into memory does not fail");
        Ok(image)
    }

    pub fn hash_level(&self) -> u32 {
        self.level
    }

    /// The size of a leaf in bytes: `1 KiB << hash_level`.
    pub fn leaf_len(&self) -> u64 {
        CHUNK_LEN << self.level
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `data` at `offset`.
    ///
    /// # Panics
    /// If the range does not fit the image; [`Image::try_write`] returns an error instead.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if let Err(e) = self.try_write(offset, data) {
            panic!("{e}");
        }
    }

    /// Writes `data` at `offset`, or fails without change if the range does not fit.
    pub fn try_write(&mut self, offset: u64, data: &[u8]) -> Result<(), ImageError> {
        self.check_range(offset, data.len())?;
        if !data.is_empty() {
            let (span, leaf_len) = (self.span(), self.leaf_len());
            tree::write(&mut self.root, span, leaf_len, offset, data);
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset`.
    ///
    /// # Panics
    /// If the range does not fit the image; [`Image::try_read`] returns an error instead.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        if let Err(e) = self.try_read(offset, buf) {
            panic!("{e}");
        }
    }

    /// Reads `buf.len()` bytes at `offset`, or fails if the range does not fit.
    pub fn try_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ImageError> {
        self.check_range(offset, buf.len())?;
        if !buf.is_empty() {
            tree::read(&self.root, self.span(), offset, buf);
        }
        Ok(())
    }

    /// The BLAKE3 hash of the bytes (what `b3sum` prints for them). Recomputes only the
    /// leaves written since the last hash of this image or of the image it was cloned from.
    pub fn hash(&self) -> blake3::Hash {
        root_hash(&self.root, self.len, self.leaf_len())
    }

    /// Whether every aligned 8-byte word in which this image and `other` differ is one that
    /// `may_differ(offset)` allows; false for images of another layout. The cost follows
    /// what differs (shared and zero subtrees are skipped), not the image size.
    pub fn differs_only_in(&self, other: &Image, may_differ: &mut dyn FnMut(u64) -> bool) -> bool {
        if !self.same_layout(other) {
            return false;
        }
        let mut theirs = vec![0; crate::diff::BLOCK_LEN];
        let outcome = self.for_each_changed_block(Some(other), &mut |offset, ours| {
            let theirs = &mut theirs[..ours.len()];
            other.read(offset, theirs);
            let words = ours.chunks(8).zip(theirs.chunks(8));
            for (i, (a, b)) in words.enumerate() {
                if a != b && !may_differ(offset + 8 * i as u64) {
                    return Err(io::ErrorKind::Other.into());
                }
            }
            Ok(())
        });
        outcome.is_ok()
    }

    /// Writes the bytes to a new file at `path` atomically (a temporary file renamed into
    /// place). Zero blocks become holes.
    pub fn write_to(&self, path: impl AsRef<Path>) -> io::Result<()> {
        create_atomically(path.as_ref(), |file| self.write_changes(file, None))
    }

    /// Whether `other` has the same length and leaf size, which is what
    /// [`Image::write_changes`] needs of a base.
    pub(crate) fn same_layout(&self, other: &Image) -> bool {
        self.len == other.len && self.level == other.level
    }

    /// Brings `file`, which holds the bytes of `base` (`None`: an empty file), to the bytes of
    /// this image, writing only the blocks that differ. `base` must have the same layout.
    pub(crate) fn write_changes(&self, file: &File, base: Option<&Image>) -> io::Result<()> {
        file.set_len(self.len)?;
        self.for_each_changed_block(base, &mut |offset, bytes| file.write_all_at(bytes, offset))
    }

    fn for_each_changed_block(
        &self,
        base: Option<&Image>,
        emit: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        debug_assert!(base.is_none_or(|base| self.same_layout(base)));
        let base_root = base.map(|base| &*base.root);
        changed_blocks(
            Some(&self.root),
            base_root,
            self.span(),
            self.leaf_len(),
            emit,
        )
    }

    fn span(&self) -> Span {
        Span {
            offset: 0,
            len: self.len,
        }
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<(), ImageError> {
        let fits = offset
            .checked_add(len as u64)
            .is_some_and(|end| end <= self.len);
        if fits {
            Ok(())
        } else {
            Err(ImageError::OutOfRange {
                offset,
                len: len as u64,
                image_len: self.len,
            })
        }
    }
}

impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Image")
            .field("len", &self.len)
            .field("hash_level", &self.level)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the nodes (shared ones once per path) that have no cached chaining value.
    fn uncached(node: &Node) -> usize {
        let own = usize::from(node.cv().get().is_none());
        own + match node {
            Node::Parent { left, right, .. } => uncached(left) + uncached(right),
            Node::Zero { children, .. } => children
                .get()
                .map_or(0, |(left, right)| uncached(left) + uncached(right)),
            Node::Leaf { .. } => 0,
        }
    }

    /// The spans of the nodes from the root to the leaf holding `offset`.
    fn path_to(image: &Image, offset: u64) -> Vec<(u64, u64)> {
        let mut span = image.span();
        let mut path = vec![(span.offset, span.len)];
        while !span.is_leaf(image.leaf_len()) {
            let (left, right) = span.halves();
            span = if offset < right.offset { left } else { right };
            path.push((span.offset, span.len));
        }
        path
    }

    #[test]
    fn a_write_invalidates_exactly_the_path_to_its_leaf() {
        let mut image = Image::zeroed(5 << 20);
        image.write(12345, b"base");
        image.hash();
        // The root's hash is a root finalisation, never a cached chaining value.
        assert_eq!(uncached(&image.root), 1);

        let mut copy = image.clone();
        let offset = (3 << 20) + 77;
        copy.write(offset, &[1]);
        assert_eq!(uncached(&copy.root), path_to(&copy, offset).len());
        assert_eq!(uncached(&image.root), 1, "the original keeps its caches");

        // A write across a leaf boundary invalidates the union of both leaves' paths.
        let mut two = image.clone();
        let boundary = 64 * image.leaf_len();
        two.write(boundary - 1, &[1, 2]);
        let mut paths = path_to(&two, boundary - 1);
        paths.extend(path_to(&two, boundary));
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(uncached(&two.root), paths.len());
    }

    #[test]
    fn clones_share_everything_but_the_written_path() {
        let mut image = Image::zeroed(1 << 30);
        image.write(0, &[7; 100]);
        let mut copy = image.clone();
        copy.write((1 << 30) - 1, &[9]);
        let (Node::Parent { left: a, .. }, Node::Parent { left: b, .. }) =
            (&*image.root, &*copy.root)
        else {
            panic!("a written 1 GiB image has a parent at the root");
        };
        assert!(Arc::ptr_eq(a, b), "the unwritten left half is shared");
    }

    #[test]
    fn an_image_of_parts_pads_each_file_to_its_part() {
        let dir = tempfile::tempdir().unwrap();
        let (pm, disk) = (dir.path().join("pm"), dir.path().join("disk"));
        // A part that does not end on a leaf boundary, so the second starts inside a leaf.
        let pm_len = 3000;
        std::fs::write(&pm, [1u8; 2000]).unwrap();
        std::fs::write(&disk, [2u8; 1500]).unwrap();
        let image = Image::from_files(&[(&pm, pm_len), (&disk, 4096)]).unwrap();
        let mut want = vec![0u8; 3000 + 4096];
        want[..2000].fill(1);
        want[3000..4500].fill(2);
        let mut got = vec![0u8; want.len()];
        image.read(0, &mut got);
        assert_eq!(got, want);
        let e = Image::from_files(&[(&pm, 1000)]).unwrap_err().to_string();
        assert!(e.contains("2000 bytes"), "{e}");
    }

    #[test]
    fn out_of_range_accesses_fail_without_changing_the_image() {
        let mut image = Image::zeroed(100);
        let before = image.hash();
        let error = image.try_write(98, &[1, 2, 3]).unwrap_err();
        assert_eq!(
            error,
            ImageError::OutOfRange {
                offset: 98,
                len: 3,
                image_len: 100
            }
        );
        assert!(image.try_write(u64::MAX, &[1]).is_err(), "no overflow");
        assert!(image.try_read(100, &mut [0]).is_err());
        assert_eq!(image.hash(), before);
        assert!(
            image.try_write(100, &[]).is_ok(),
            "an empty write at the end fits"
        );
    }

    #[test]
    #[should_panic(expected = "outside the image")]
    fn write_panics_out_of_range() {
        Image::zeroed(10).write(10, &[1]);
    }

    #[test]
    fn with_hash_level_keeps_the_bytes_and_rejects_huge_levels() {
        let mut image = Image::zeroed(200_000);
        image.write(70_000, b"payload");
        let hash = image.hash();
        let small = image.clone().with_hash_level(1).unwrap();
        assert_eq!((small.hash_level(), small.leaf_len()), (1, 2048));
        assert_eq!(small.hash(), hash);
        let mut buf = [0; 7];
        small.read(70_000, &mut buf);
        assert_eq!(&buf, b"payload");
        assert_eq!(
            image.with_hash_level(MAX_HASH_LEVEL + 1).unwrap_err(),
            ImageError::InvalidHashLevel {
                level: MAX_HASH_LEVEL + 1
            }
        );
    }

    #[test]
    fn differs_only_in_names_each_differing_word_once_and_stops_at_one_not_allowed() {
        let mut base = Image::zeroed(1 << 20);
        base.write(0x9000, b"shared in both");
        let mut other = base.clone();
        other.write(0x10, &[1]);
        other.write(0x4_0008, &[2, 3]);
        let mut seen = Vec::new();
        let all = other.differs_only_in(&base, &mut |word| {
            seen.push(word);
            true
        });
        assert!(all);
        assert_eq!(seen, [0x10, 0x4_0008]);
        assert!(!other.differs_only_in(&base, &mut |word| word == 0x10));
        assert!(base.differs_only_in(&base.clone(), &mut |_| false));
        assert!(!base.differs_only_in(&Image::zeroed(1 << 19), &mut |_| true));
    }
}
