//! `Image::hash` against `blake3::hash` of the same bytes, over many lengths, levels, writes
//! and clones.

use persim_image::Image;
use proptest::prelude::*;

/// Deterministic pseudo-random bytes.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    blake3::Hasher::new()
        .update(&seed.to_le_bytes())
        .finalize_xof()
        .fill(&mut bytes);
    bytes
}

fn image_of(bytes: &[u8], level: u32) -> Image {
    let mut image = Image::zeroed(bytes.len() as u64)
        .with_hash_level(level)
        .unwrap();
    // Uneven pieces, so that writes cross leaf boundaries.
    for (i, piece) in bytes.chunks(40_000).enumerate() {
        image.write(i as u64 * 40_000, piece);
    }
    image
}

fn contents(image: &Image) -> Vec<u8> {
    let mut bytes = vec![0; image.len() as usize];
    image.read(0, &mut bytes);
    bytes
}

const K: usize = 1024;
const LENGTHS: &[usize] = &[
    0,
    1,
    1023,
    1024,
    1025,
    2048,
    3 * K + 7,
    32 * K - 1,
    32 * K,
    32 * K + 1,
    33 * K,
    64 * K,
    3 * 32 * K + 5,
    7 * 33 * K,
    1000 * K + 1,
    5 << 20,
];

#[test]
fn hash_equals_blake3_for_many_lengths_and_levels() {
    for &len in LENGTHS {
        let bytes = noise(len as u64, len);
        let zeros = vec![0; len];
        for level in [0, 1, 2, 5, 8] {
            let image = image_of(&bytes, level);
            assert_eq!(
                image.hash(),
                blake3::hash(&bytes),
                "len {len} level {level}"
            );
            assert_eq!(contents(&image), bytes, "len {len} level {level}");
            let zero = Image::zeroed(len as u64).with_hash_level(level).unwrap();
            assert_eq!(
                zero.hash(),
                blake3::hash(&zeros),
                "zero len {len} level {level}"
            );
        }
    }
}

#[test]
fn hash_equals_blake3_for_100_mib_plus_3() {
    let len = (100 << 20) + 3;
    let bytes = noise(100, len);
    let mut image = image_of(&bytes, 5);
    assert_eq!(image.hash(), blake3::hash(&bytes));

    let mut bytes = bytes;
    for (i, offset) in [0, 77_777, 50 << 20, len - 1].into_iter().enumerate() {
        image.write(offset as u64, &[i as u8 ^ 0xa5]);
        bytes[offset] = i as u8 ^ 0xa5;
        assert_eq!(
            image.hash(),
            blake3::hash(&bytes),
            "after write at {offset}"
        );
    }
}

#[test]
fn sparse_writes_into_a_zero_image_hash_like_the_bytes() {
    let len = 5 << 20;
    let mut image = Image::zeroed(len as u64);
    let mut bytes = vec![0; len];
    image.hash();
    for (i, offset) in [4096, 32 * K - 3, len / 2, len - 10]
        .into_iter()
        .enumerate()
    {
        let data = noise(i as u64, 9);
        image.write(offset as u64, &data);
        bytes[offset..offset + 9].copy_from_slice(&data);
        assert_eq!(image.hash(), blake3::hash(&bytes));
    }
}

#[test]
fn hash_agrees_with_the_b3sum_binary() {
    let Ok(output) = std::process::Command::new("b3sum")
        .arg("--version")
        .output()
    else {
        println!("note: b3sum is not installed; skipping the comparison with it");
        return;
    };
    assert!(output.status.success());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for len in [0, 1025, 32 * K + 1, 3 << 20] {
        let mut image = Image::zeroed(len as u64);
        if len > 0 {
            image.write(len as u64 / 3, &noise(len as u64, len / 2));
        }
        let path = dir.join(format!("{len}.img"));
        image.write_to(&path).unwrap();
        let output = std::process::Command::new("b3sum")
            .arg("--no-names")
            .arg(&path)
            .output()
            .unwrap();
        let printed = String::from_utf8(output.stdout).unwrap();
        assert_eq!(printed.trim(), image.hash().to_hex().as_str(), "len {len}");
    }
}

/// An operation on one of the live images.
#[derive(Clone, Debug)]
enum Op {
    Write {
        image: usize,
        offset: u64,
        data: Vec<u8>,
    },
    Clone {
        image: usize,
    },
    Hash {
        image: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<usize>(), any::<u64>(), prop::collection::vec(any::<u8>(), 1..3000))
            .prop_map(|(image, offset, data)| Op::Write { image, offset, data }),
        1 => any::<usize>().prop_map(|image| Op::Clone { image }),
        2 => any::<usize>().prop_map(|image| Op::Hash { image }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn writes_and_clones_keep_bytes_and_hashes_right(
        len in 0u64..200_000,
        level in 0u32..4,
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let mut images = vec![Image::zeroed(len).with_hash_level(level).unwrap()];
        let mut models = vec![vec![0u8; len as usize]];
        for op in ops {
            match op {
                Op::Write { image, offset, data } => {
                    let i = image % images.len();
                    let len = len as usize;
                    let data = &data[..data.len().min(len)];
                    let offset = if len == data.len() { 0 } else { offset as usize % (len - data.len()) };
                    images[i].write(offset as u64, data);
                    models[i][offset..offset + data.len()].copy_from_slice(data);
                }
                Op::Clone { image } => {
                    let i = image % images.len();
                    images.push(images[i].clone());
                    models.push(models[i].clone());
                }
                Op::Hash { image } => {
                    let i = image % images.len();
                    prop_assert_eq!(images[i].hash(), blake3::hash(&models[i]));
                }
            }
        }
        for (image, model) in images.iter().zip(&models) {
            prop_assert_eq!(image.hash(), blake3::hash(model));
            prop_assert_eq!(&contents(image), model);
        }
    }
}
