//! The lanes of a real libpmemobj pool (Debian's libpmemobj, as the PMDK example tests
//! use it) found behind 1 MiB of other PM, with lane 0's undo log holding the snapshot a
//! transaction took where the model looks for it; a pool whose heap is not where its
//! descriptor says (a file not laid out in order) has none.

use persim_image::{pmemobj_layout, Image};
use std::path::Path;
use std::process::Command;

/// Creates a pool, snapshots the root object's first word in a transaction and prints the
/// root's pool offset.
const PROGRAM: &str = r#"
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	PMEMobjpool *pop = pmemobj_create(argv[1], "persim", PMEMOBJ_MIN_POOL, 0600);
	if (pop == NULL)
		return 1;
	PMEMoid root = pmemobj_root(pop, 64);
	uint64_t *word = pmemobj_direct(root);
	TX_BEGIN(pop) {
		pmemobj_tx_add_range(root, 0, 8);
		*word = 42;
	} TX_END
	printf("%lu\n", (unsigned long)root.off);
	pmemobj_close(pop);
	return 0;
}
"#;

/// Lane 0's undo log entries: after the redo logs (256 + 704 bytes) and its 64-byte header.
const UNDO_DATA: u64 = 960 + 64;
const BUF_CPY: u64 = 0b110 << 61;

fn in_pm(pool: &Path, offset: u64) -> (Image, u64) {
    let mut bytes = vec![0u8; offset as usize];
    bytes.extend(std::fs::read(pool).unwrap());
    let pm = pool.with_extension("pm");
    std::fs::write(&pm, &bytes).unwrap();
    let len = bytes.len() as u64;
    (Image::from_file(&pm, len).unwrap(), len)
}

fn word(image: &Image, at: u64) -> u64 {
    let mut bytes = [0u8; 8];
    image.read(at, &mut bytes);
    u64::from_le_bytes(bytes)
}

#[test]
fn the_lanes_of_a_real_pool_are_found_with_the_undo_log_where_the_model_reads_it() {
    if !Path::new("/usr/include/libpmemobj.h").exists() {
        println!("SKIPPED: libpmemobj-dev is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (source, program) = (tmp.path().join("pool.c"), tmp.path().join("pool"));
    std::fs::write(&source, PROGRAM).unwrap();
    let built = Command::new("cc")
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .arg("-lpmemobj")
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let pool = tmp.path().join("pool.obj");
    let made = Command::new(&program)
        .arg(&pool)
        .env("PMEM_IS_PMEM_FORCE", "1")
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let root: u64 = String::from_utf8_lossy(&made.stdout)
        .trim()
        .parse()
        .unwrap();

    let offset = 1 << 20;
    let (image, len) = in_pm(&pool, offset);
    let layout = pmemobj_layout(&image, len).expect("a pool");
    assert_eq!(layout.pool, offset);
    assert_eq!((layout.lanes, layout.nlanes), (offset + 8192, 1024));
    // the committed snapshot stays behind in lane 0's undo log: the root's first 8 bytes
    let entry = layout.lanes + UNDO_DATA;
    assert_eq!(word(&image, entry), BUF_CPY | root);
    assert_eq!(word(&image, entry + 16), 8, "its size");

    // the heap's header overwritten: the pages are not where the descriptor says
    let heap = offset + word(&image, offset + 0x1410);
    let mut moved = image.clone();
    moved.write(heap, &[0; 16]);
    assert!(pmemobj_layout(&moved, len).is_none());
    // no pool
    assert!(pmemobj_layout(&Image::zeroed(8 << 20), 8 << 20).is_none());
}
