//! Checks the file-system suite (suites/fs/*.toml): every test has the keys the tester
//! reads, its ignore list is made of fs-dump fields, and, where busybox is installed, its
//! setup and operations run with busybox applets and each operation changes the dump.

mod fs_dump_support;

use fs_dump_support::{dump, fs_dump, running_as_root, Scratch};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tests the issue asks for, by file name.
const TESTS: [&str; 19] = [
    "append",
    "atime",
    "chmod",
    "chown",
    "ctime-mtime",
    "fallocate-write",
    "hello-world",
    "link",
    "long-name",
    "mkdir-rmdir",
    "rename-dir",
    "rename-long-name",
    "rename-overwrite",
    "symlink",
    "touch",
    "truncate",
    "unlink",
    "update-in-line",
    "update-middle",
];

#[derive(Debug)]
struct Test {
    name: String,
    setup: String,
    ops: Vec<String>,
    ignore: Vec<String>,
}

#[derive(Debug)]
enum Value {
    Text(String),
    List(Vec<String>),
}

fn suite_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/fs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

/// A TOML basic string at the start of `text`: the decoded string and the text after it.
fn basic_string(text: &str) -> Result<(String, &str), String> {
    let body = text
        .strip_prefix('"')
        .ok_or("a string must start with '\"'")?;
    let mut decoded = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((decoded, &body[i + 1..])),
            '\\' => decoded.push(match chars.next().map(|(_, c)| c) {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('"') => '"',
                Some('\\') => '\\',
                other => return Err(format!("unsupported escape \\{other:?}")),
            }),
            c => decoded.push(c),
        }
    }
    Err("unterminated string".into())
}

/// A one-line value: a basic string or an array of basic strings.
fn value(text: &str) -> Result<Value, String> {
    let Some(inner) = text.strip_prefix('[') else {
        let (string, rest) = basic_string(text)?;
        return match rest.trim() {
            "" => Ok(Value::Text(string)),
            rest => Err(format!("unexpected {rest:?} after a string")),
        };
    };
    let mut rest = inner.trim_start();
    let mut items = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix(']') {
            return match after.trim() {
                "" => Ok(Value::List(items)),
                after => Err(format!("unexpected {after:?} after an array")),
            };
        }
        let (item, after) = basic_string(rest)?;
        items.push(item);
        rest = after.trim_start();
        rest = rest.strip_prefix(',').map_or(rest, str::trim_start);
    }
}

/// Reads a suite file line by line (no TOML crate here): exactly the keys description,
/// setup (strings), ops and ignore (arrays of strings).
fn load(path: &Path) -> Result<Test, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut values = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (key, text) = line
            .split_once(" = ")
            .ok_or(format!("no `key = value`: {line}"))?;
        let parsed = value(text.trim()).map_err(|e| format!("{key}: {e}"))?;
        if values.insert(key.to_string(), parsed).is_some() {
            return Err(format!("{key} given twice"));
        }
    }
    let mut take = |key: &str| values.remove(key).ok_or(format!("no {key}"));
    let (Value::Text(description), Value::Text(setup), Value::List(ops), Value::List(ignore)) = (
        take("description")?,
        take("setup")?,
        take("ops")?,
        take("ignore")?,
    ) else {
        return Err("description and setup must be strings, ops and ignore arrays".into());
    };
    if let Some(key) = values.keys().next() {
        return Err(format!("unknown key {key}"));
    }
    if description.is_empty() || ops.is_empty() || ops.iter().any(String::is_empty) {
        return Err("needs a description and at least one non-empty op".into());
    }
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    Ok(Test {
        name,
        setup,
        ops,
        ignore,
    })
}

fn suite() -> Vec<Test> {
    let tests: Vec<Test> = suite_files()
        .iter()
        .map(|path| load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect();
    let names: Vec<&str> = tests.iter().map(|test| test.name.as_str()).collect();
    assert_eq!(names, TESTS);
    tests
}

#[test]
fn the_value_reader_rejects_malformed_lines() {
    assert!(
        matches!(value(r#"["a \"b\"", "c\nd"]"#), Ok(Value::List(v)) if v == ["a \"b\"", "c\nd"])
    );
    assert!(value(r#""open"#).is_err());
    assert!(value(r#""a" "b""#).is_err());
    assert!(value(r#"["a""#).is_err());
    assert!(value("[\"a\"] x").is_err());
}

#[test]
fn every_suite_file_has_the_tester_keys() {
    let tests = suite();
    assert_eq!(tests.len(), 19);
    let scratch = Scratch::new("fs-suite-ignore");
    for test in &tests {
        let output = fs_dump(&["--ignore", &test.ignore.join(",")], &scratch.path);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{}: ignore: {stderr}", test.name);
    }
}

/// Whether `busybox` can be run here; the guest's shell and applets are busybox's.
fn busybox_available() -> bool {
    Command::new("busybox")
        .arg("true")
        .status()
        .is_ok_and(|s| s.success())
}

fn busybox_sh(script: &str) -> Result<(), String> {
    let output = Command::new("busybox")
        .args(["sh", "-e", "-c", script])
        .output();
    let output = output.map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn every_operation_runs_with_busybox_and_changes_the_dump() {
    if !busybox_available() {
        eprintln!("busybox is not installed: the suite's commands were not run");
        return;
    }
    let as_root = running_as_root();
    for test in suite() {
        if test.name == "chown" && !as_root {
            eprintln!("not root: the chown test was not run");
            continue;
        }
        let scratch = Scratch::new(&format!("fs-suite-{}", test.name));
        let mnt = scratch.path.to_str().unwrap();
        let in_scratch = |command: &str| command.replace("/mnt", mnt);
        if let Err(e) = busybox_sh(&in_scratch(&test.setup)) {
            panic!("{}: setup failed: {e}", test.name);
        }
        let ignore = test.ignore.join(",");
        let args = ["--ignore", &ignore];
        // The first listing of a directory may update its atime: do it before comparing.
        dump(&args, &scratch.path);
        let mut before = dump(&args, &scratch.path);
        for op in &test.ops {
            if let Err(e) = busybox_sh(&in_scratch(op)) {
                panic!("{}: `{op}` failed: {e}", test.name);
            }
            let after = dump(&args, &scratch.path);
            assert_ne!(
                after, before,
                "{}: `{op}` changed nothing fs-dump shows",
                test.name
            );
            before = after;
        }
        if test.name.ends_with("long-name") {
            let longest = before.lines().filter_map(|line| line.strip_suffix("\": {"));
            let longest = longest
                .map(|key| key.rsplit('/').next().unwrap().len())
                .max();
            assert_eq!(longest, Some(255), "{}: no 255-byte name", test.name);
        }
    }
}
