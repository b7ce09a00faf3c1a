//! `ImageStore`: a directory of deduplicated crash images, `<hash>.img`, and `index.json`
//! naming the origins of each.

use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use persim_model::Origin;
use serde::{Deserialize, Serialize};

use crate::reflink;
use crate::Image;
use persim_trace::atomic_file::create_atomically;

const INDEX_FILE: &str = "index.json";

/// What the index knows about one stored image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Every failure point and choice that produced the image, in insertion order.
    pub origins: Vec<Origin>,
    /// The image length in bytes.
    pub size: u64,
}

/// A directory of images, each stored once under its BLAKE3 hash.
///
/// Where the file system supports reflinks, a new image file is a reflink of the previously
/// written one plus the blocks that differ from it, so near-identical images share disk
/// blocks. Otherwise each file is written whole, with zero blocks left as holes.
#[derive(Debug)]
pub struct ImageStore {
    dir: PathBuf,
    records: BTreeMap<[u8; 32], Record>,
    reflinks: bool,
    /// The last image written and its file: the reflink source for the next one.
    base: Option<(Image, PathBuf)>,
    /// Origins read from an existing index: a resumed run meets them again.
    resumed: HashSet<Origin>,
    /// Images of an existing index whose files have not been seen yet: one that is gone
    /// (deleted to save space, or lost) is written again when a replay meets it.
    unverified: HashSet<[u8; 32]>,
}

impl ImageStore {
    /// Opens the store in `dir`, creating the directory if needed and loading its index if
    /// there is one, so that an interrupted run can continue.
    pub fn open(dir: impl AsRef<Path>) -> io::Result<ImageStore> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        let records = load_index(&dir.join(INDEX_FILE))?;
        let reflinks = reflink::supported_in(&dir)?;
        Ok(ImageStore {
            dir,
            resumed: records
                .values()
                .flat_map(|r| r.origins.iter().cloned())
                .collect(),
            unverified: records.keys().copied().collect(),
            records,
            reflinks,
            base: None,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether new images are written as reflinks of earlier ones.
    pub fn uses_reflinks(&self) -> bool {
        self.reflinks
    }

    /// The file that holds (or will hold) the image with `hash`.
    pub fn image_path(&self, hash: &blake3::Hash) -> PathBuf {
        ImageStore::image_file(&self.dir, &hash.to_hex())
    }

    /// The file of the image with hash `hex` in `dir`: the one spelling of `<hash>.img`,
    /// for a store and for images written elsewhere (a run's fully persisted images, those
    /// `persim debug image` makes again).
    pub fn image_file(dir: &Path, hex: &str) -> PathBuf {
        dir.join(format!("{hex}.img"))
    }

    /// Records that `origin` produced `image`, writing the image file if the store does not
    /// have it yet. Returns the image's hash. Call [`ImageStore::flush_index`] to persist the
    /// index.
    pub fn insert(&mut self, image: &Image, origin: Origin) -> io::Result<blake3::Hash> {
        let hash = image.hash();
        let path = self.image_path(&hash);
        if let Some(record) = self.records.get_mut(hash.as_bytes()) {
            if !self.resumed.contains(&origin) {
                record.origins.push(origin);
            }
            if self.unverified.remove(hash.as_bytes()) && !path.is_file() {
                self.write_image(image, &path)?;
            }
            return Ok(hash);
        }
        // A file without a record is left from an interrupted run; the rename that created
        // it makes it complete.
        let complete = fs::metadata(&path).is_ok_and(|m| m.len() == image.len());
        if !complete {
            self.write_image(image, &path)?;
        }
        self.records.insert(
            *hash.as_bytes(),
            Record {
                origins: vec![origin],
                size: image.len(),
            },
        );
        Ok(hash)
    }

    fn write_image(&mut self, image: &Image, path: &Path) -> io::Result<()> {
        // The last file may be gone: a run deletes each image once it is recovered.
        let base = self
            .base
            .as_ref()
            .filter(|(base, path)| self.reflinks && base.same_layout(image) && path.is_file());
        create_atomically(path, |file| match base {
            Some((base, base_path)) => {
                reflink::clone_file(file, &File::open(base_path)?)?;
                image.write_changes(file, Some(base))
            }
            None => image.write_changes(file, None),
        })?;
        if self.reflinks {
            self.base = Some((image.clone(), path.to_path_buf()));
        }
        Ok(())
    }

    /// Writes `index.json` atomically.
    pub fn flush_index(&self) -> io::Result<()> {
        let index: BTreeMap<String, &Record> = self
            .records()
            .map(|(hash, record)| (hash.to_hex().to_string(), record))
            .collect();
        let json = serde_json::to_vec_pretty(&index).map_err(io::Error::other)?;
        create_atomically(&self.dir.join(INDEX_FILE), |mut file| {
            file.write_all(&json)?;
            file.write_all(b"\n")
        })
    }

    pub fn get(&self, hash: &blake3::Hash) -> Option<&Record> {
        self.records.get(hash.as_bytes())
    }

    /// All records, ordered by hash.
    pub fn records(&self) -> impl Iterator<Item = (blake3::Hash, &Record)> {
        self.records
            .iter()
            .map(|(hash, record)| (blake3::Hash::from_bytes(*hash), record))
    }

    /// The number of distinct images.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

fn load_index(path: &Path) -> io::Result<BTreeMap<[u8; 32], Record>> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot read {}: {e}", path.display()),
            ))
        }
    };
    let invalid = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is not a valid image index ({what}); move it away to start a new store",
                path.display()
            ),
        )
    };
    let index: BTreeMap<String, Record> =
        serde_json::from_slice(&text).map_err(|e| invalid(e.to_string()))?;
    index
        .into_iter()
        .map(|(hex, record)| {
            let hash =
                blake3::Hash::from_hex(&hex).map_err(|e| invalid(format!("key {hex:?}: {e}")))?;
            Ok((*hash.as_bytes(), record))
        })
        .collect()
}
