//! The Pangolin ports of libpmemobj's map examples (targets/pangolin/maps), built with `cc`
//! against pangolin.h and libpangolin.so: a random workload of inserts and removes, one
//! transaction each, must leave each map holding exactly the keys a model holds, with one
//! object per entry; a lost page of the pool is repaired and said so, the map unchanged;
//! and removing every key leaves no node or entry behind (no leak, no double free).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The pool's first zone (two metadata pages, two 16 KiB log copies): its first page holds
/// the bitmap, the root and the map's first objects.
const ZONE: usize = 2 * 4096 + 2 * (16 << 10);

fn build(dir: &Path) -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let maps = manifest.join("../maps");
    // libpangolin.so of this build sits beside the test binary (as in c_abi.rs).
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap();
    let program = dir.join("pangolin-map");
    let status = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&program)
        .args(
            [
                "pangolin-map.c",
                "btree_map.c",
                "ctree_map.c",
                "hashmap_tx.c",
            ]
            .map(|f| maps.join(f)),
        )
        .arg("-I")
        .arg(&maps)
        .arg("-I")
        .arg(manifest.join("include"))
        .arg("-I")
        .arg(manifest.join("../../../include"))
        .arg("-L")
        .arg(lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lpangolin")
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc failed");
    program
}

fn run(program: &Path, args: &[String]) -> Output {
    let output = Command::new(program)
        .args(args)
        .env("PGL_ACCESS", "eadr")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Inserts and removes of keys below 300 (a third removes), from a fixed seed, and the
/// keys left.
fn workload(seed: u64, ops: usize) -> (Vec<String>, BTreeSet<u64>) {
    let mut state = seed;
    let mut model = BTreeSet::new();
    let mut list = vec!["create".to_string()];
    for _ in 0..ops {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let key = (state >> 33) % 300;
        if (state >> 20).is_multiple_of(3) {
            model.remove(&key);
            list.push(format!("remove:{key}"));
        } else {
            model.insert(key);
            list.push(format!("insert:{key}"));
        }
    }
    (list, model)
}

fn show(program: &Path, map: &str, pool: &Path) -> (Value, String) {
    let mut args = vec![map.to_string(), pool.display().to_string(), "show".into()];
    args.extend(["0", "7", "299"].map(String::from));
    let output = run(program, &args);
    let state = serde_json::from_slice(&output.stdout).expect("show prints JSON");
    (state, String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn each_map_holds_exactly_the_model_keys_and_a_lost_page_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path());
    for (map, seed) in [("btree", 1), ("ctree", 2), ("hashmap_tx", 3)] {
        let pool = dir.path().join(map);
        let (ops, model) = workload(seed, 700);
        let mut args = vec![map.to_string(), pool.display().to_string(), "setup".into()];
        args.extend(ops);
        run(&program, &args);
        let (state, stderr) = show(&program, map, &pool);
        let walk: Vec<u64> = state["walk"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_u64().unwrap())
            .collect();
        assert_eq!(walk, model.iter().copied().collect::<Vec<_>>(), "{map}");
        for key in [0, 7, 299] {
            assert_eq!(
                state["lookup"][key.to_string()],
                Value::Bool(model.contains(&key)),
                "{map} lookup {key}"
            );
        }
        let objects = |t: &str| state["objects"][t].as_u64().unwrap_or(0);
        let keys = model.len() as u64;
        match map {
            // Every node holds 3 to 7 keys (the root 1 to 7).
            "btree" => assert!((keys.div_ceil(7)..=keys / 3 + 1).contains(&objects("2"))),
            // A leaf per key, an inner node per leaf but one.
            "ctree" => assert_eq!((objects("3"), objects("2")), (keys, keys - 1)),
            _ => {
                assert_eq!((objects("3"), objects("4")), (keys, 1));
                assert_eq!(state["count"], keys);
            }
        }
        assert_eq!(
            objects("0") + objects("1"),
            2,
            "{map}: the root and the map"
        );
        assert!(!stderr.contains("repaired"), "{map}: {stderr}");

        let mut bytes = std::fs::read(&pool).unwrap();
        bytes[ZONE..ZONE + 4096].fill(0);
        std::fs::write(&pool, &bytes).unwrap();
        let (again, stderr) = show(&program, map, &pool);
        assert_eq!(again, state, "{map}: the lost page changed the map");
        assert!(
            stderr.contains("repaired"),
            "{map}: no repair said: {stderr}"
        );
        let (_, stderr) = show(&program, map, &pool);
        assert!(
            !stderr.contains("repaired"),
            "{map}: repaired twice: {stderr}"
        );

        // Emptied, a map holds no node or entry: none leaked, none freed twice.
        let mut args = vec![map.to_string(), pool.display().to_string(), "setup".into()];
        args.extend(model.iter().map(|k| format!("remove:{k}")));
        run(&program, &args);
        let (empty, _) = show(&program, map, &pool);
        assert_eq!(empty["walk"], serde_json::json!([]), "{map}");
        let left = |t: &str| empty["objects"][t].as_u64().unwrap_or(0);
        assert_eq!((left("2"), left("3")), (0, 0), "{map}: {empty}");
        assert_eq!(left("4"), u64::from(map == "hashmap_tx"), "{map}: {empty}");
    }
}
