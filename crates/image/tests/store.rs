//! `ImageStore` on the local file system (plain writes where reflinks are unsupported) and,
//! when one can be mounted, on an XFS loopback file system with reflinks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use persim_image::{Image, ImageStore};
use persim_model::{Choice, FailureKind, FailurePoint, Origin};

fn origin(index: u64) -> Origin {
    Origin {
        point: FailurePoint {
            index,
            kind: FailureKind::Fence,
            checkpoint: Some(1),
        },
        choice: Choice::Enumerated {
            number: index,
            of: 9,
        },
        block: None,
    }
}

fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    blake3::Hasher::new()
        .update(&seed.to_le_bytes())
        .finalize_xof()
        .fill(&mut bytes);
    bytes
}

fn contents(image: &Image) -> Vec<u8> {
    let mut bytes = vec![0; image.len() as usize];
    image.read(0, &mut bytes);
    bytes
}

/// Inserts a base image and variants of it; checks files, records and the reloaded index.
fn exercise_store(dir: &Path, len: usize) -> ImageStore {
    let mut base = Image::zeroed(len as u64);
    base.write(0, &noise(1, len / 2));
    let mut variants = vec![base.clone()];
    for i in 0..8u64 {
        let mut variant = base.clone();
        variant.write(i * 4099 % len as u64, &[i as u8 ^ 0x5a; 3]);
        if i == 3 {
            // Zeroing a non-zero block must reach the file too.
            variant.write(8192, &[0; 4096]);
        }
        variants.push(variant);
    }

    let mut store = ImageStore::open(dir).unwrap();
    let mut hashes = Vec::new();
    for (i, image) in variants.iter().enumerate() {
        hashes.push(store.insert(image, origin(i as u64)).unwrap());
    }
    // The base again: a known image gains an origin and is not written again.
    let base_path = store.image_path(&hashes[0]);
    let modified = fs::metadata(&base_path).unwrap().modified().unwrap();
    assert_eq!(store.insert(&base, origin(100)).unwrap(), hashes[0]);
    assert_eq!(
        fs::metadata(&base_path).unwrap().modified().unwrap(),
        modified
    );
    store.flush_index().unwrap();

    for (image, hash) in variants.iter().zip(&hashes) {
        assert_eq!(*hash, blake3::hash(&contents(image)));
        let file = fs::read(store.image_path(hash)).unwrap();
        assert!(file == contents(image), "file {hash} holds the image bytes");
    }
    let distinct: std::collections::BTreeSet<_> = hashes.iter().map(|h| h.to_hex()).collect();
    assert_eq!(store.len(), distinct.len());
    assert_eq!(
        store.get(&hashes[0]).unwrap().origins,
        vec![origin(0), origin(100)]
    );

    let reopened = ImageStore::open(dir).unwrap();
    let records: Vec<_> = reopened.records().collect();
    let expected: Vec<_> = store.records().collect();
    assert_eq!(records, expected);
    assert_eq!(reopened.get(&hashes[1]).unwrap().size, len as u64);
    store
}

#[test]
fn store_without_reflinks_writes_each_distinct_image_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = exercise_store(dir.path(), 300_000);
    if store.uses_reflinks() {
        println!(
            "note: {} supports reflinks; the plain path was not tested",
            dir.path().display()
        );
    }
    let image_files = fs::read_dir(dir.path())
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().path().extension() == Some("img".as_ref()))
        .count();
    assert_eq!(image_files, store.len(), "no stray temporary files");
    let index = fs::read_to_string(dir.path().join("index.json")).unwrap();
    assert!(index.contains("\"origins\"") && index.contains("\"size\": 300000"));
}

#[test]
fn a_resumed_store_skips_files_of_an_interrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut image = Image::zeroed(10_000);
    image.write(5, b"resume");
    let mut store = ImageStore::open(dir.path()).unwrap();
    let hash = store.insert(&image, origin(1)).unwrap();
    drop(store); // killed before flushing the index

    let modified = fs::metadata(dir.path().join(format!("{hash}.img")))
        .unwrap()
        .modified()
        .unwrap();
    let mut store = ImageStore::open(dir.path()).unwrap();
    assert!(store.get(&hash).is_none());
    store.insert(&image, origin(2)).unwrap();
    let path = store.image_path(&hash);
    assert_eq!(fs::metadata(path).unwrap().modified().unwrap(), modified);
    assert_eq!(store.get(&hash).unwrap().origins, vec![origin(2)]);
}

#[test]
fn a_resumed_store_writes_again_an_image_whose_file_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let mut image = Image::zeroed(10_000);
    image.write(7, b"gone");
    let mut store = ImageStore::open(dir.path()).unwrap();
    let hash = store.insert(&image, origin(1)).unwrap();
    store.flush_index().unwrap();
    let path = store.image_path(&hash);
    fs::remove_file(&path).unwrap();

    let mut store = ImageStore::open(dir.path()).unwrap();
    store.insert(&image, origin(1)).unwrap();
    assert_eq!(fs::read(&path).unwrap(), contents(&image));
    assert_eq!(store.get(&hash).unwrap().origins, vec![origin(1)]);
}

#[test]
fn a_corrupt_index_is_reported_with_a_way_out() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("index.json"), "{ not json").unwrap();
    let error = ImageStore::open(dir.path()).unwrap_err();
    assert!(error.to_string().contains("move it away"), "{error}");
}

#[test]
fn image_write_to_and_from_file_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut image = Image::zeroed(3 << 20);
    image.write(1 << 20, &noise(3, 70_000));
    let path = dir.path().join("a.img");
    image.write_to(&path).unwrap();
    assert!(fs::read(&path).unwrap() == contents(&image));

    let bigger = Image::from_file(&path, 4 << 20).unwrap();
    let mut expected = contents(&image);
    expected.resize(4 << 20, 0);
    assert!(contents(&bigger) == expected, "a short file is zero-padded");
    assert_eq!(bigger.hash(), blake3::hash(&expected));

    let error = Image::from_file(&path, 1 << 20).unwrap_err();
    assert!(
        error.to_string().contains("more than the image size"),
        "{error}"
    );
}

/// An XFS file system on a loop device backed by a file, both in a temporary directory;
/// unmounted on drop, before the directory goes.
struct XfsMount {
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl XfsMount {
    fn try_new() -> Result<XfsMount, String> {
        let tmp = tempfile::tempdir().unwrap();
        let (backing, dir) = (tmp.path().join("xfs.fs"), tmp.path().join("mnt"));
        fs::create_dir(&dir).unwrap();
        let run = |cmd: &mut Command| -> Result<(), String> {
            match cmd.output() {
                Ok(out) if out.status.success() => Ok(()),
                Ok(out) => Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr))),
                Err(e) => Err(format!("{cmd:?}: {e}")),
            }
        };
        fs::File::create(&backing)
            .and_then(|f| f.set_len(320 << 20))
            .map_err(|e| e.to_string())?;
        let made = run(Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&backing))
        .and_then(|()| {
            run(Command::new("mount")
                .args(["-o", "loop"])
                .arg(&backing)
                .arg(&dir))
        });
        made.map(|()| XfsMount { dir, _tmp: tmp })
    }
}

impl Drop for XfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

fn used_bytes(dir: &Path) -> u64 {
    let file = fs::File::open(dir).unwrap();
    rustix::fs::syncfs(&file).unwrap();
    let stat = rustix::fs::fstatvfs(&file).unwrap();
    (stat.f_blocks - stat.f_bfree) * stat.f_frsize
}

#[test]
fn store_on_xfs_shares_blocks_through_reflinks() {
    let mount = match XfsMount::try_new() {
        Ok(mount) => mount,
        Err(e) => {
            println!(
                "note: cannot mount an XFS loopback file system ({e}); skipping the reflink test"
            );
            return;
        }
    };
    let len = 16 << 20;
    let before = used_bytes(&mount.dir);
    let store = exercise_store(&mount.dir, len);
    assert!(store.uses_reflinks(), "XFS with reflink=1 supports FICLONE");
    let used = used_bytes(&mount.dir) - before;
    // Nine images with 8 MiB of data each would take 72 MiB written whole.
    assert!(
        used < 12 << 20,
        "{used} bytes used: the images do not share blocks"
    );
}
