//! The command line of fs-dump.

use lexopt::Arg::{Long, Short, Value};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: fs-dump [OPTIONS] ROOT

Prints the tree under ROOT (symlinks are never followed) as JSON: one object keyed by
full path, each value an object of the path's lstat fields, file contents and symlink
target. Keys are sorted and every field is on its own line, so a line diff between two
dumps shows exactly what changed.

options:
  --ignore FIELD[,FIELD...]  leave these fields out (repeatable); fields: atime, blocks,
                             contents, ctime, gid, ino, mode, mtime, nlink, rdev, size,
                             target, type, uid
  --max-content BYTES        print at most BYTES of a file's contents; a longer file gets
                             contents_len and contents_truncated: true
  --exclude NAME             skip every entry called NAME, anywhere below ROOT
                             (repeatable), e.g. --exclude lost+found
  -h, --help                 print this help

exit status: 0 dumped (entries that cannot be read are reported as \"error\" in the JSON),
1 ROOT cannot be read or stdout cannot be written, 2 bad command line";

/// Fields `--ignore` accepts: everything fs-dump prints except `error`. A field stands for
/// itself and its `FIELD_*` variants (`contents` also covers `contents_hex`, ...). The host
/// checks a test's `ignore` against the same list before a VM boots.
pub use persim_abi::FS_DUMP_FIELDS as FIELDS;

#[derive(Debug)]
pub struct Options {
    pub root: PathBuf,
    pub ignore: Vec<&'static str>,
    /// Longest contents printed; `None` prints whole files.
    pub max_content: Option<usize>,
    pub exclude: Vec<OsString>,
}

impl Options {
    /// Whether a printed field (`contents_hex`, `mtime`, ...) is wanted.
    pub fn wants(&self, field: &str) -> bool {
        let group = field.split('_').next().unwrap_or(field);
        !self.ignore.contains(&group)
    }

    /// Whether a directory entry is skipped by `--exclude`.
    pub fn excludes(&self, name: &OsStr) -> bool {
        self.exclude.iter().any(|skip| skip == name)
    }
}

/// Parses the arguments after the program name, `None` for `--help`. Options take their
/// value as the next argument or after `=`; `--` ends the options.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Options>, String> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut root = None;
    let mut options = Options {
        root: PathBuf::new(),
        ignore: Vec::new(),
        max_content: None,
        exclude: Vec::new(),
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        let name = match arg {
            Value(operand) => {
                if root.replace(PathBuf::from(operand)).is_some() {
                    return Err("give exactly one ROOT directory".into());
                }
                continue;
            }
            Short('h') | Long("help") => return Ok(None),
            Long(name @ ("ignore" | "max-content" | "exclude")) => name.to_owned(),
            Long(name) => return Err(format!("unknown option --{name}")),
            Short(letter) => return Err(format!("unknown option -{letter}")),
        };
        let value = parser
            .value()
            .map_err(|_| format!("--{name} needs a value"))?;
        match name.as_str() {
            "ignore" => {
                // Empty items are skipped, so an empty list (`--ignore ""`) ignores nothing.
                for field in value.to_string_lossy().split(',').filter(|f| !f.is_empty()) {
                    options.ignore.push(known_field(field)?);
                }
            }
            "max-content" => {
                options.max_content = Some(value.to_string_lossy().parse().map_err(|_| {
                    format!("--max-content takes a number of bytes, not {value:?}")
                })?);
            }
            _ => {
                if value.is_empty() || value.as_encoded_bytes().contains(&b'/') {
                    return Err(format!(
                        "--exclude takes an entry name without '/', not {value:?}"
                    ));
                }
                options.exclude.push(value);
            }
        }
    }
    options.root = root.ok_or("give the ROOT directory to dump")?;
    Ok(Some(options))
}

fn known_field(field: &str) -> Result<&'static str, String> {
    FIELDS
        .iter()
        .find(|known| **known == field)
        .copied()
        .ok_or_else(|| {
            format!(
                "--ignore: unknown field {field:?}; fields are {}",
                FIELDS.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump_options(args: &[&str]) -> Result<Options, String> {
        parse(args.iter().map(OsString::from))?.ok_or_else(|| "help".into())
    }

    #[test]
    fn options_take_values_separately_or_after_equals() {
        let options = dump_options(&[
            "--ignore",
            "atime,ctime",
            "--ignore=ino",
            "--max-content=16",
            "--exclude",
            "lost+found",
            "/mnt",
        ])
        .unwrap();
        assert_eq!(options.root, PathBuf::from("/mnt"));
        assert_eq!(options.ignore, ["atime", "ctime", "ino"]);
        assert_eq!(options.max_content, Some(16));
        assert!(options.excludes(OsStr::new("lost+found")));
        assert!(!options.wants("atime") && options.wants("mtime"));
    }

    #[test]
    fn an_empty_ignore_list_ignores_nothing() {
        let options = dump_options(&["--ignore", "", "--ignore=atime,", "/mnt"]).unwrap();
        assert_eq!(options.ignore, ["atime"]);
    }

    #[test]
    fn ignoring_a_field_ignores_its_variants() {
        let options = dump_options(&["--ignore", "contents", "/mnt"]).unwrap();
        assert!(!options.wants("contents_hex") && !options.wants("contents_truncated"));
        assert!(options.wants("ctime"));
    }

    #[test]
    fn bad_command_lines_are_explained() {
        assert!(dump_options(&[]).unwrap_err().contains("ROOT"));
        assert!(dump_options(&["/a", "/b"])
            .unwrap_err()
            .contains("exactly one"));
        assert!(dump_options(&["--ignore", "colour", "/a"])
            .unwrap_err()
            .contains("colour"));
        assert!(dump_options(&["--max-content", "lots", "/a"])
            .unwrap_err()
            .contains("lots"));
        assert!(dump_options(&["--exclude", "a/b", "/a"])
            .unwrap_err()
            .contains("'/'"));
        assert!(dump_options(&["/a", "--ignore"])
            .unwrap_err()
            .contains("needs a value"));
        assert!(dump_options(&["--frobnicate", "/a"])
            .unwrap_err()
            .contains("unknown option"));
        assert_eq!(
            dump_options(&["--", "--odd"]).unwrap().root,
            PathBuf::from("--odd")
        );
        assert_eq!(dump_options(&["--help", "/a"]).unwrap_err(), "help");
        assert_eq!(dump_options(&["-h"]).unwrap_err(), "help");
        assert!(dump_options(&["-x", "/a"])
            .unwrap_err()
            .contains("unknown option -x"));
        assert!(dump_options(&["--exclude=", "/a"])
            .unwrap_err()
            .contains("without '/'"));
    }
}
