//! `persim conjure`: the PmemConjurer plugin (conjurer/) run by the real clang 16 on the
//! rule tests of conjurer/tests (each rule's violation and its correct twin) and on
//! PMDK's examples with the dissertation's bugs re-created (targets/pmdk-examples).
//!
//! The plugin is built here (conjurer/build.sh, idempotent). Without clang 16's
//! development files the tests say `SKIPPED: …` and pass; under CI they fail.

mod common;

use common::persim;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// One build of the plugin at a time.
static BUILD: Mutex<()> = Mutex::new(());

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether the plugin is built (built now if need be); the reason it cannot be, said.
fn plugin_ready(test: &str) -> bool {
    let _one = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new("bash")
        .arg(root().join("conjurer/build.sh"))
        .output()
        .unwrap();
    if out.status.success() {
        return true;
    }
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(
        std::env::var_os("CI").is_none() && why.contains("no clang 16"),
        "{test}: the plugin does not build: {why}"
    );
    persim_vm::testing::skip(test, why.trim());
    false
}

/// The plugin conjurer/build.sh makes, whatever CARGO_TARGET_DIR is.
fn plugin() -> String {
    root()
        .join("target/conjurer/pmem-conjurer.so")
        .to_str()
        .unwrap()
        .to_string()
}

/// `persim conjure --json ARGS` with the plugin: its exit code and findings as (rule,
/// file name, line).
fn conjure(args: &[&str]) -> (i32, Vec<(String, String, u64)>) {
    let plugin = plugin();
    let mut all = vec!["conjure", "--json", "--plugin", &plugin];
    all.extend(args);
    let out = persim(&all);
    let code = out.status.code().unwrap();
    assert!(
        code != 2,
        "persim conjure {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut found = Vec::new();
    for file in json["files"].as_array().unwrap() {
        for f in file["findings"].as_array().unwrap() {
            let name = Path::new(f["file"].as_str().unwrap()).file_name().unwrap();
            found.push((
                f["rule"].as_str().unwrap().to_string(),
                name.to_string_lossy().into_owned(),
                f["line"].as_u64().unwrap(),
            ));
            if f["rule"] == "4" {
                // The path says where the object was freed.
                let path = f["path"].to_string();
                assert!(path.contains("freed here (TX_FREE)"), "{f}");
            }
        }
    }
    assert_eq!(json["findings"].as_u64().unwrap() as usize, found.len());
    (code, found)
}

/// The findings a rule test expects: its lines marked `/* rule X */`.
fn expected(file: &Path) -> Vec<(String, String, u64)> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .zip(1..)
        .filter_map(|(text, line)| {
            let rule = text.split("/* rule ").nth(1)?.split(" */").next()?;
            Some((rule.to_string(), name.clone(), line))
        })
        .collect()
}

#[test]
fn each_rule_is_found_at_its_line_in_the_violation_and_not_in_its_twin() {
    if !plugin_ready("each_rule_is_found_at_its_line_in_the_violation_and_not_in_its_twin") {
        return;
    }
    let tests = root().join("conjurer/tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&tests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    let mut rules = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let want = expected(file);
        let (code, mut found) = conjure(&[file.to_str().unwrap()]);
        found.sort();
        if name.ends_with("-bad.c") {
            assert!(!want.is_empty(), "{name} marks no line /* rule X */");
            assert_eq!(code, 1, "{name}");
            rules.extend(want.iter().map(|w| w.0.clone()));
        } else {
            assert!(want.is_empty() && name.ends_with("-good.c"), "{name}");
            assert_eq!(code, 0, "{name}");
        }
        assert_eq!(found, want, "{name}");
    }
    rules.sort();
    rules.dedup();
    assert_eq!(rules, ["1", "1a", "1b", "2", "3", "4"]);
}

#[test]
fn flags_after_the_separator_and_bad_input_exit_2_with_what_to_do() {
    if !plugin_ready("flags_after_the_separator_and_bad_input_exit_2_with_what_to_do") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flag.c");
    // Compiles only with -DBROKEN_SIZE given; then breaks rule 1b.
    std::fs::write(
        &file,
        "#include <libpmemobj.h>\nvoid f(PMEMobjpool *p, PMEMoid o)\n{\n\
         \tlong double *x = pmemobj_direct(o);\n\tpmemobj_persist(p, x, BROKEN_SIZE);\n}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, found) = conjure(&[f, "--", "-DBROKEN_SIZE=8"]);
    assert_eq!(code, 1);
    assert_eq!(found, [("1b".to_string(), "flag.c".to_string(), 5)]);

    // The plugin is found in the source tree (PERSIM_HOME) when not given.
    let out = assert_cmd::Command::cargo_bin("persim")
        .unwrap()
        .env("PERSIM_HOME", root())
        .args(["conjure", f])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("BROKEN_SIZE") && err.contains("fix the error or the flags"),
        "{err}"
    );
    let out = persim(&["conjure", "--plugin", &plugin(), "/nonexistent/x.c"]);
    assert_eq!(out.status.code(), Some(2));
    let out = persim(&["conjure", f, "--plugin", "/nonexistent.so"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("conjurer/build.sh"));
    // Nothing is left behind in the directory analysed.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1);
}

/// The re-created bug of each variant: its file, the rule, and the text of its line.
const BUGS: &[(&str, &str, &str, &str)] = &[
    (
        "hashmap-tx-remove",
        "hashmap/hashmap_tx.c",
        "4",
        "return D_RO(var)->value;",
    ),
    ("pi-persist", "pi.c", "1b", "sizeof(double));"),
    (
        "hashmap-rp-persist",
        "hashmap/hashmap_rp.c",
        "1b",
        "sizeof(hashmap));",
    ),
    (
        "btree-root",
        "tree_map/btree_map.c",
        "2",
        "D_RW(map)->root = TX_ZNEW",
    ),
    (
        "rtree-insert-value",
        "tree_map/rtree_map.c",
        "2",
        "->key_size -= i;",
    ),
    (
        "rtree-remove-extra-node",
        "tree_map/rtree_map.c",
        "2",
        "*node = rtree_new_node(new_key",
    ),
    (
        "rtree-remove-node",
        "tree_map/rtree_map.c",
        "2",
        "D_RW(*node)->value = OID_NULL;",
    ),
];

/// The source `file` of a variant of PMDK's examples, and `persim conjure`'s arguments
/// for it: the file, then the flags its build uses.
fn example(variant: &str, file: &str) -> (PathBuf, Vec<String>) {
    let src = root()
        .join("target/pmdk-examples")
        .join(variant)
        .join("src");
    let path = src.join(file);
    let mut args = vec![
        path.to_str().unwrap().to_string(),
        "--".into(),
        "-std=gnu99".into(),
    ];
    for dir in [
        root().join("targets/pmdk-examples/include"),
        src.join("map"),
        src.join("tree_map"),
        src.join("hashmap"),
    ] {
        args.extend(["-I".to_string(), dir.to_str().unwrap().to_string()]);
    }
    (path, args)
}

#[test]
fn every_recreated_pmdk_bug_is_found_at_its_line_and_not_in_the_shipped_file() {
    let test = "every_recreated_pmdk_bug_is_found_at_its_line_and_not_in_the_shipped_file";
    if !plugin_ready(test) {
        return;
    }
    let examples = root().join("target/pmdk-examples");
    if !examples.join("shipped/src/pi.c").is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: run targets/pmdk-examples/build.sh"
        );
        persim_vm::testing::skip(
            test,
            "no PMDK examples (targets/pmdk-examples/build.sh makes them)",
        );
        return;
    }
    for (variant, file, rule, text) in BUGS {
        let found_in = |variant: &str| {
            let (path, args) = example(variant, file);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            (path.clone(), conjure(&args).1)
        };
        let (path, found) = found_in(variant);
        let line = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .position(|l| l.contains(text))
            .unwrap() as u64
            + 1;
        assert!(
            found.iter().any(|f| f.0 == *rule && f.2 == line),
            "{variant}: no rule {rule} at {file}:{line} in {found:?}"
        );
        let (_, shipped) = found_in("shipped");
        assert!(
            !shipped.iter().any(|f| f.0 == *rule),
            "shipped {file}: rule {rule} in {shipped:?}"
        );
    }
}

/// Static and dynamic together: the re-created `hashmap_tx` use-after-free (rule 4 at
/// `hashmap_tx.c:251`) checked against three traced runs of its variant in the VM. Only
/// inserts: the run never reaches the line. Removing one of 2 keys: it reads the freed
/// entry, but the rebuild that follows allocated the block again, so `analyze` does not
/// flag it. Removing one of 11 keys (no rebuild): `analyze`'s use-after-free there is the
/// witness.
#[test]
fn a_static_finding_is_never_reached_reached_or_witnessed_by_a_traced_run() {
    let test = "a_static_finding_is_never_reached_reached_or_witnessed_by_a_traced_run";
    if !plugin_ready(test) || !common::vm_ready(test) {
        return;
    }
    let (path, args) = example("hashmap-tx-remove", "hashmap/hashmap_tx.c");
    if !path.is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: run targets/pmdk-examples/build.sh"
        );
        persim_vm::testing::skip(
            test,
            "no PMDK examples (targets/pmdk-examples/build.sh makes them)",
        );
        return;
    }
    let line = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .position(|l| l.contains("return D_RO(var)->value;"))
        .unwrap() as u64
        + 1;
    let config = root().join("targets/pmdk-examples/tests/vm.toml");
    let dir = tempfile::tempdir().unwrap();
    let program = "pmdk-map-hashmap-tx-remove hashmap_tx /mnt/pool";
    for (keys, run, class) in [
        (2, "insert:3", "not-reached"),
        (2, "remove:1", "reached-not-flagged"),
        (11, "remove:1", "witnessed"),
    ] {
        let trace = dir.path().join(format!("{keys}-{run}.ptrace"));
        let inserts: Vec<String> = (1..=keys).map(|k| format!("insert:{k}")).collect();
        let traced = persim(&[
            "trace",
            "--vm",
            config.to_str().unwrap(),
            "--setup",
            &format!("{program} setup create {} && sync", inserts.join(" ")),
            "--cmd",
            &format!("{program} run {run}"),
            "--stack-traces",
            "--reads",
            "--trace-calls",
            "pmdk",
            "-o",
            trace.to_str().unwrap(),
        ]);
        assert_eq!(
            traced.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&traced.stderr)
        );
        let plugin = plugin();
        let mut all = vec!["conjure", "--json", "--plugin", &plugin];
        all.extend(["--trace", trace.to_str().unwrap()]);
        all.extend(args.iter().map(String::as_str));
        let out = persim(&all);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        let findings = json["files"][0]["findings"].as_array().unwrap();
        let uaf = findings
            .iter()
            .find(|f| f["rule"] == "4" && f["line"] == line)
            .unwrap_or_else(|| panic!("no rule 4 at line {line}: {json:#}"));
        assert_eq!(uaf["run"]["class"], class, "{keys} keys, {run}: {uaf:#}");
        let witness = uaf["run"]["witness"].as_str();
        if class == "witnessed" {
            let witness = witness.unwrap();
            assert!(
                witness.starts_with("use-after-free at hm_tx_remove+")
                    && witness.ends_with(&format!("(hashmap_tx.c:{line})")),
                "{witness}"
            );
        } else {
            assert_eq!(witness, None, "{uaf:#}");
        }
        assert_eq!(json["run"][class.replace('-', "_")], 1, "{json:#}");
    }
    // A trace is required to place findings: a file that is no trace is refused.
    let plugin = plugin();
    let out = persim(&[
        "conjure",
        "--plugin",
        &plugin,
        "--trace",
        "/nonexistent",
        &args[0],
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a trace or a run directory"));
}
