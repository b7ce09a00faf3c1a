//! A worker's own PM backing file. Images are copied into it, never attached themselves, so
//! what recovery writes lands here and image files stay untouched.

use crate::error::VmError;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The unit compared and copied: the guest's page size, the file systems' block size.
const BLOCK: usize = 4096;
/// Bytes read per step from the image and the scratch file.
const CHUNK: usize = 1 << 20;

pub(super) struct ScratchPm {
    path: PathBuf,
    file: File,
    size: u64,
}

impl ScratchPm {
    /// A sparse (all-zero) file of `size` bytes in `dir`, removed when dropped.
    pub(super) fn create(dir: &Path, size: u64) -> Result<ScratchPm, VmError> {
        // Unique per process and per worker: extractions may run concurrently.
        static WORKERS: AtomicU64 = AtomicU64::new(0);
        let worker = WORKERS.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir_all(dir)
            .map_err(|e| VmError::io(format!("creating {}", dir.display()), e))?;
        let path = dir.join(format!("extract-{}-{worker}.pm", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| VmError::io(format!("creating {}", path.display()), e))?;
        let scratch = ScratchPm { path, file, size };
        scratch.clear()?;
        Ok(scratch)
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Zeroes the file by punching it to a hole. Only while no guest maps it.
    pub(super) fn clear(&self) -> Result<(), VmError> {
        self.file
            .set_len(0)
            .and_then(|()| self.file.set_len(self.size))
            .map_err(|e| VmError::io(format!("clearing {}", self.path.display()), e))
    }

    /// Makes the file's contents equal to `image`, writing only the blocks that differ
    /// (consecutive images differ in few blocks). Returns the number of blocks written.
    /// The guest maps the file shared, so it sees the new contents without any copy.
    pub(super) fn load(&mut self, image: &Path) -> Result<u64, VmError> {
        let context = |what: &str, path: &Path| format!("{what} {}", path.display());
        let mut source =
            File::open(image).map_err(|e| VmError::io(context("opening", image), e))?;
        let mut wanted = vec![0u8; CHUNK];
        let mut current = vec![0u8; CHUNK];
        let mut written = 0;
        let mut offset = 0u64;
        while offset < self.size {
            let len = CHUNK.min((self.size - offset) as usize);
            source
                .read_exact(&mut wanted[..len])
                .map_err(|e| VmError::io(context("reading", image), e))?;
            self.file
                .read_exact_at(&mut current[..len], offset)
                .map_err(|e| VmError::io(context("reading", &self.path), e))?;
            // Runs of differing blocks are written with one call each.
            let mut block = 0;
            while block * BLOCK < len {
                let differs = |b: usize| {
                    let range = b * BLOCK..((b + 1) * BLOCK).min(len);
                    wanted[range.clone()] != current[range]
                };
                if !differs(block) {
                    block += 1;
                    continue;
                }
                let start = block;
                while block * BLOCK < len && differs(block) {
                    block += 1;
                }
                let range = start * BLOCK..(block * BLOCK).min(len);
                self.file
                    .write_all_at(&wanted[range.clone()], offset + range.start as u64)
                    .map_err(|e| VmError::io(context("writing", &self.path), e))?;
                written += (block - start) as u64;
            }
            offset += len as u64;
        }
        Ok(written)
    }
}

impl Drop for ScratchPm {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 3 * CHUNK as u64;

    fn image(dir: &Path, name: &str, blocks: &[(usize, u8)]) -> PathBuf {
        let mut data = vec![0u8; SIZE as usize];
        for &(block, byte) in blocks {
            data[block * BLOCK..(block + 1) * BLOCK].fill(byte);
        }
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap();
        path
    }

    #[test]
    fn loading_writes_only_differing_blocks_and_never_touches_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let mut scratch = ScratchPm::create(dir.path(), SIZE).unwrap();
        let last = SIZE as usize / BLOCK - 1;
        let a = image(
            dir.path(),
            "a.img",
            &[(0, 1), (1, 1), (2, 1), (300, 7), (last, 9)],
        );
        let b = image(dir.path(), "b.img", &[(0, 1), (1, 2), (2, 2), (300, 7)]);
        let (a_bytes, b_bytes) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

        assert_eq!(scratch.load(&a).unwrap(), 5);
        assert_eq!(std::fs::read(scratch.path()).unwrap(), a_bytes);
        // A guest write between images is undone too.
        scratch.file.write_all_at(&[5], 40 * BLOCK as u64).unwrap();
        assert_eq!(scratch.load(&b).unwrap(), 2 + 1 + 1);
        assert_eq!(std::fs::read(scratch.path()).unwrap(), b_bytes);
        assert_eq!(scratch.load(&b).unwrap(), 0);
        assert_eq!(std::fs::read(&a).unwrap(), a_bytes);

        scratch.clear().unwrap();
        assert!(std::fs::read(scratch.path())
            .unwrap()
            .iter()
            .all(|&b| b == 0));
        let path = scratch.path().to_owned();
        drop(scratch);
        assert!(!path.exists());
    }

    #[test]
    fn a_short_image_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut scratch = ScratchPm::create(dir.path(), SIZE).unwrap();
        let short = dir.path().join("short.img");
        std::fs::write(&short, [1u8; 100]).unwrap();
        let e = scratch.load(&short).unwrap_err().to_string();
        assert!(e.contains("short.img"), "{e}");
    }
}
