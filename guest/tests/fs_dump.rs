//! Runs the built fs-dump on real directory trees.

mod fs_dump_support;

use fs_dump_support::{dump, fs_dump, running_as_root, Scratch};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

/// One entry of every kind fs-dump tells apart, with fixed permissions so the dump does
/// not depend on the umask.
fn sample_tree(root: &Path) {
    fs::write(root.join("file"), "HelloWorld\n").unwrap();
    fs::write(root.join("empty"), "").unwrap();
    fs::write(root.join("binary"), [0x00, 0xff, 0x10]).unwrap();
    fs::create_dir_all(root.join("dir/nested")).unwrap();
    fs::write(root.join("dir/nested/deep"), "deep").unwrap();
    fs::hard_link(root.join("file"), root.join("dir/hardlink")).unwrap();
    symlink("dir/nested/deep", root.join("symlink")).unwrap();
    fs::write(root.join("q\"uo\nte"), "odd name").unwrap();
    fs::write(root.join(OsStr::from_bytes(b"caf\xe9")), "latin-1 name").unwrap();
    let mkfifo = Command::new("mkfifo").arg(root.join("fifo")).status();
    assert!(mkfifo.expect("run mkfifo").success(), "mkfifo failed");
    for (path, mode) in [
        ("", 0o755),
        ("dir", 0o755),
        ("dir/nested", 0o755),
        ("file", 0o644),
        ("empty", 0o644),
        ("binary", 0o644),
        ("dir/nested/deep", 0o644),
        ("q\"uo\nte", 0o644),
        ("caf\u{e9}", 0o644),
        ("fifo", 0o640),
    ] {
        let path = match path {
            "caf\u{e9}" => root.join(OsStr::from_bytes(b"caf\xe9")),
            path => root.join(path),
        };
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }
}

#[test]
fn dump_of_every_kind_of_entry_is_exact() {
    let scratch = Scratch::new("fs-dump-exact");
    let root = &scratch.path;
    sample_tree(root);
    // Directory sizes and link counts differ between file systems: take them from lstat.
    let dir_fields = |path: &Path| {
        let meta = fs::symlink_metadata(path).unwrap();
        format!(
            "\"nlink\": {},\n    \"size\": {}",
            meta.nlink(),
            meta.size()
        )
    };
    let expected = r#"{
  "<root>": {
    "mode": "0755",
    <root dir>,
    "type": "dir"
  },
  "<root>/binary": {
    "contents_hex": "00ff10",
    "mode": "0644",
    "nlink": 1,
    "size": 3,
    "type": "file"
  },
  "<root>/caf\\xe9": {
    "contents": "latin-1 name",
    "mode": "0644",
    "nlink": 1,
    "size": 12,
    "type": "file"
  },
  "<root>/dir": {
    "mode": "0755",
    <dir dir>,
    "type": "dir"
  },
  "<root>/dir/hardlink": {
    "contents": "HelloWorld\n",
    "mode": "0644",
    "nlink": 2,
    "size": 11,
    "type": "file"
  },
  "<root>/dir/nested": {
    "mode": "0755",
    <nested dir>,
    "type": "dir"
  },
  "<root>/dir/nested/deep": {
    "contents": "deep",
    "mode": "0644",
    "nlink": 1,
    "size": 4,
    "type": "file"
  },
  "<root>/empty": {
    "contents": "",
    "mode": "0644",
    "nlink": 1,
    "size": 0,
    "type": "file"
  },
  "<root>/fifo": {
    "mode": "0640",
    "nlink": 1,
    "size": 0,
    "type": "fifo"
  },
  "<root>/file": {
    "contents": "HelloWorld\n",
    "mode": "0644",
    "nlink": 2,
    "size": 11,
    "type": "file"
  },
  "<root>/q\"uo\nte": {
    "contents": "odd name",
    "mode": "0644",
    "nlink": 1,
    "size": 8,
    "type": "file"
  },
  "<root>/symlink": {
    "mode": "0777",
    "nlink": 1,
    "size": 15,
    "target": "dir/nested/deep",
    "type": "symlink"
  }
}
"#
    .replace("<root dir>", &dir_fields(root))
    .replace("<dir dir>", &dir_fields(&root.join("dir")))
    .replace("<nested dir>", &dir_fields(&root.join("dir/nested")))
    .replace("<root>", root.to_str().unwrap());
    let ignore = [
        "--ignore",
        "atime,ctime,mtime,ino,blocks",
        "--ignore=uid,gid",
    ];
    assert_eq!(dump(&ignore, root), expected);
}

/// Parses a dump with Python's json module, checks that both levels of keys are sorted
/// as written, and returns `path: field,field,...` lines.
fn parse_with_python(json: &str) -> String {
    let check = "import json, sys\n\
        pairs = json.load(sys.stdin, object_pairs_hook=lambda p: p)\n\
        paths = [k for k, _ in pairs]\n\
        assert paths == sorted(paths), 'paths not sorted'\n\
        for path, fields in pairs:\n\
        \x20   names = [k for k, _ in fields]\n\
        \x20   assert names == sorted(names), path + ': fields not sorted'\n\
        \x20   print(path.encode('unicode_escape').decode() + ': ' + ','.join(names))\n";
    let mut python = Command::new("python3")
        .args(["-c", check])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    use std::io::Write;
    python
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    let output = python.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "python3 rejects the dump: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn full_dump_is_valid_json_with_sorted_keys_and_all_fields() {
    let scratch = Scratch::new("fs-dump-json");
    let root = &scratch.path;
    sample_tree(root);
    let json = dump(&[], root);
    let fields = parse_with_python(&json);
    let root = root.to_str().unwrap();
    let file = "atime,blocks,contents,ctime,gid,ino,mode,mtime,nlink,size,type,uid";
    let binary = "atime,blocks,contents_hex,ctime,gid,ino,mode,mtime,nlink,size,type,uid";
    let other = "atime,blocks,ctime,gid,ino,mode,mtime,nlink,size,type,uid";
    let symlink = "atime,blocks,ctime,gid,ino,mode,mtime,nlink,size,target,type,uid";
    for expected in [
        format!("{root}: {other}"),
        format!("{root}/dir/nested: {other}"),
        format!("{root}/file: {file}"),
        format!("{root}/empty: {file}"),
        format!("{root}/binary: {binary}"),
        format!("{root}/q\"uo\\nte: {file}"),
        format!("{root}/caf\\\\xe9: {file}"),
        format!("{root}/fifo: {other}"),
        format!("{root}/symlink: {symlink}"),
    ] {
        assert!(
            fields.lines().any(|line| line == expected),
            "no `{expected}` in\n{fields}"
        );
    }
    assert_eq!(fields.lines().count(), 12, "{fields}");
    // The stat fields are the file's own, timestamps as SECONDS.NANOS.
    let meta = fs::symlink_metadata(Path::new(root).join("file")).unwrap();
    for line in [
        format!("\"ino\": {},", meta.ino()),
        format!("\"blocks\": {},", meta.blocks()),
        format!("\"uid\": {}", meta.uid()),
        format!("\"mtime\": \"{}.{:09}\",", meta.mtime(), meta.mtime_nsec()),
        format!("\"ctime\": \"{}.{:09}\",", meta.ctime(), meta.ctime_nsec()),
    ] {
        assert!(
            json.contains(&format!("\n    {line}\n")),
            "no {line} in\n{json}"
        );
    }
}

#[test]
fn two_runs_print_the_same_dump() {
    let scratch = Scratch::new("fs-dump-twice");
    sample_tree(&scratch.path);
    // Listing a directory may update its atime (relatime), so directories' atimes differ.
    let first = dump(&["--ignore", "atime"], &scratch.path);
    assert_eq!(dump(&["--ignore", "atime"], &scratch.path), first);
}

#[test]
fn reading_contents_leaves_the_atime_alone() {
    let scratch = Scratch::new("fs-dump-atime");
    let file = scratch.path.join("file");
    fs::write(&file, "HelloWorld\n").unwrap();
    let atime = |path: &Path| {
        let meta = fs::symlink_metadata(path).unwrap();
        (meta.atime(), meta.atime_nsec())
    };
    // A fresh file has atime == mtime, so under relatime a plain read would update it.
    let before = atime(&file);
    let json = dump(&[], &scratch.path);
    assert!(json.contains("\"contents\": \"HelloWorld\\n\""), "{json}");
    assert_eq!(atime(&file), before);
}

#[test]
fn ignore_leaves_fields_out() {
    let scratch = Scratch::new("fs-dump-ignore");
    sample_tree(&scratch.path);
    let ignored = [
        "\"atime\":",
        "\"ctime\":",
        "\"ino\":",
        "\"blocks\":",
        "\"contents",
    ];
    let full = dump(&[], &scratch.path);
    assert!(ignored.iter().all(|field| full.contains(field)));
    let json = dump(
        &["--ignore", "atime,ctime,ino", "--ignore", "blocks,contents"],
        &scratch.path,
    );
    for field in ignored {
        assert!(!json.contains(field), "{field} is still in\n{json}");
    }
    assert!(
        json.contains("\"mtime\":") && json.contains("\"target\":"),
        "{json}"
    );
    assert_eq!(parse_with_python(&json).lines().count(), 12);
}

#[test]
fn exclude_skips_entries_by_name_at_any_depth() {
    let scratch = Scratch::new("fs-dump-exclude");
    let root = &scratch.path;
    sample_tree(root);
    fs::create_dir(root.join("lost+found")).unwrap();
    fs::write(root.join("dir/lost+found"), "also skipped").unwrap();
    let json = dump(&["--exclude", "lost+found", "--exclude=nested"], root);
    let paths = parse_with_python(&json);
    assert!(
        !paths.contains("lost+found") && !paths.contains("nested"),
        "{paths}"
    );
    assert!(
        paths.contains("/dir/hardlink:") && paths.contains("/symlink:"),
        "{paths}"
    );
    assert_eq!(paths.lines().count(), 10, "{paths}");
    assert!(dump(&[], root).contains("lost+found"));
}

#[test]
fn max_content_truncates_longer_files() {
    let scratch = Scratch::new("fs-dump-max");
    let root = &scratch.path;
    fs::write(root.join("long"), "HelloWorld\n").unwrap();
    fs::write(root.join("short"), "Hello").unwrap();
    fs::write(root.join("binary"), [0xff; 8]).unwrap();
    let json = dump(&["--max-content", "5"], root);
    let long = "    \"contents\": \"Hello\",\n    \"contents_len\": 11,\n    \
                \"contents_truncated\": true,\n";
    assert!(json.contains(long), "{json}");
    let binary = "    \"contents_hex\": \"ffffffffff\",\n    \"contents_len\": 8,\n";
    assert!(json.contains(binary), "{json}");
    // Exactly max bytes is not truncated.
    assert_eq!(json.matches("contents_truncated").count(), 2, "{json}");
}

#[test]
fn a_missing_root_fails_with_a_message() {
    let scratch = Scratch::new("fs-dump-missing");
    let output = fs_dump(&[], &scratch.path.join("absent"));
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read ROOT") && stderr.contains("absent"),
        "{stderr}"
    );
}

#[test]
fn bad_options_exit_2_with_usage() {
    let scratch = Scratch::new("fs-dump-usage");
    let output = fs_dump(&["--ignore", "colour"], &scratch.path);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown field \"colour\"") && stderr.contains("usage:"),
        "{stderr}"
    );
}

#[test]
fn unreadable_entries_are_reported_in_the_dump() {
    let scratch = Scratch::new("fs-dump-unreadable");
    let root = &scratch.path;
    fs::create_dir(root.join("locked")).unwrap();
    fs::write(root.join("locked/hidden"), "").unwrap();
    fs::write(root.join("secret"), "").unwrap();
    fs::write(root.join("public"), "HelloWorld\n").unwrap();
    for (path, mode) in [
        ("", 0o755),
        ("locked", 0o000),
        ("secret", 0o000),
        ("public", 0o644),
    ] {
        fs::set_permissions(root.join(path), fs::Permissions::from_mode(mode)).unwrap();
    }
    // Root reads everything, so as root the dump runs as nobody.
    let mut command = if running_as_root() {
        let mut setpriv = Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        setpriv.arg(env!("CARGO_BIN_EXE_fs-dump"));
        setpriv
    } else {
        Command::new(env!("CARGO_BIN_EXE_fs-dump"))
    };
    let output = command
        .arg(root)
        .output()
        .expect("run fs-dump (via setpriv when root)");
    let json = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let denied = "Permission denied (os error 13)";
    assert!(
        json.contains(&format!("\"error\": \"cannot list: {denied}\"")),
        "{json}"
    );
    assert!(
        json.contains(&format!("\"error\": \"cannot open: {denied}\"")),
        "{json}"
    );
    assert!(json.contains("\"contents\": \"HelloWorld\\n\""), "{json}");
    assert!(!json.contains("hidden"), "{json}");
    // Make the locked directory removable again for the scratch cleanup.
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn extended_attributes_are_dumped_sorted_and_only_where_set() {
    let scratch = Scratch::new("fs-dump-xattrs");
    let (with, without) = (scratch.path.join("with"), scratch.path.join("without"));
    fs::write(&with, "x").unwrap();
    fs::write(&without, "y").unwrap();
    let set = |name: &str, value: &[u8]| {
        let path = std::ffi::CString::new(with.as_os_str().as_bytes()).unwrap();
        let name = std::ffi::CString::new(name).unwrap();
        // SAFETY: NUL-terminated strings and a buffer of the given length.
        unsafe {
            libc::setxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        }
    };
    if set("user.b", b"\x01\x02") != 0 {
        eprintln!("skipped: this file system has no user xattrs");
        return;
    }
    assert_eq!(set("user.a", b"hi"), 0);
    let json = dump(&[], &scratch.path);
    assert!(
        json.contains("\"xattrs\": \"user.a=6869,user.b=0102\""),
        "{json}"
    );
    assert_eq!(json.matches("\"xattrs\"").count(), 1, "{json}");
    assert!(!dump(&["--ignore", "xattrs"], &scratch.path).contains("\"xattrs\""));
}
