//! What to analyse: source files with the user's flags, or the entries of a compilation
//! database (`compile_commands.json`, as CMake and Bear write it) with their own flags.

use super::ConjureError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A translation unit: a source file, the directory its flags are relative to, and the
/// preprocessor and language flags clang needs (not the compiler, `-c`, `-o`, `-M…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub file: PathBuf,
    pub directory: PathBuf,
    pub flags: Vec<String>,
}

#[derive(Deserialize)]
struct Entry {
    directory: PathBuf,
    file: PathBuf,
    arguments: Option<Vec<String>>,
    command: Option<String>,
}

/// The units of `files` (all of the database's when none is named): with `flags` from
/// the current directory, or each with its database entry's flags.
pub fn units(
    files: &[PathBuf],
    flags: &[String],
    database: Option<&Path>,
) -> Result<Vec<Unit>, ConjureError> {
    let Some(path) = database else {
        if files.is_empty() {
            return Err(ConjureError::NoFiles);
        }
        let directory = std::env::current_dir().map_err(|source| ConjureError::Read {
            path: ".".into(),
            source,
        })?;
        return files
            .iter()
            .map(|file| {
                if !file.is_file() {
                    return Err(ConjureError::NoFile(file.clone()));
                }
                Ok(Unit {
                    file: file.clone(),
                    directory: directory.clone(),
                    flags: flags.to_vec(),
                })
            })
            .collect();
    };
    let text = std::fs::read_to_string(path).map_err(|source| ConjureError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |message: String| ConjureError::Database {
        path: path.to_path_buf(),
        message,
    };
    let entries: Vec<Entry> = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let mut all = Vec::new();
    for e in entries {
        let argv = match (e.arguments, e.command) {
            (Some(a), _) => a,
            (None, Some(c)) => shlex::split(&c)
                .ok_or_else(|| bad(format!("cannot split the command of {}", e.file.display())))?,
            (None, None) => {
                return Err(bad(format!(
                    "{} has no arguments or command",
                    e.file.display()
                )))
            }
        };
        let file = e.directory.join(&e.file);
        all.push(Unit {
            flags: compile_flags(&argv, &e.file, &file),
            directory: e.directory,
            file,
        });
    }
    if files.is_empty() {
        return Ok(all);
    }
    files
        .iter()
        .map(|f| {
            let want = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
            all.iter()
                .find(|u| std::fs::canonicalize(&u.file).is_ok_and(|c| c == want))
                .cloned()
                .ok_or_else(|| ConjureError::NotInDatabase(f.clone()))
        })
        .collect()
}

/// A compiler command's flags without the compiler, the source, and what only building
/// needs (`-c`, `-o FILE`, dependency files).
fn compile_flags(argv: &[String], file: &Path, joined: &Path) -> Vec<String> {
    let mut flags = Vec::new();
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-c" | "-MD" | "-MMD" | "-MP" => {}
            "-o" | "-MF" | "-MT" | "-MQ" => {
                args.next();
            }
            _ if Path::new(a) == file || Path::new(a) == joined => {}
            _ => flags.push(a.clone()),
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_gives_each_file_its_own_flags_and_directory() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("a.c"), "").unwrap();
        std::fs::write(src.join("b.c"), "").unwrap();
        let db = dir.path().join("compile_commands.json");
        let entries = serde_json::json!([
            { "directory": src, "file": "a.c",
              "arguments": ["cc", "-O2", "-I", "inc", "-c", "-o", "a.o", "a.c", "-MD", "-MF", "a.d"] },
            { "directory": src, "file": "b.c",
              "command": "gcc -DNAME='\"x y\"' -std=gnu99 -c b.c -o b.o" }
        ]);
        std::fs::write(&db, entries.to_string()).unwrap();

        let all = units(&[], &[], Some(&db)).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].file, src.join("a.c"));
        assert_eq!(all[0].directory, src);
        assert_eq!(all[0].flags, ["-O2", "-I", "inc"]);
        assert_eq!(all[1].flags, ["-DNAME=\"x y\"", "-std=gnu99"]);

        let one = units(&[src.join("b.c")], &[], Some(&db)).unwrap();
        assert_eq!(one, [all[1].clone()]);
        let missing = dir.path().join("c.c");
        std::fs::write(&missing, "").unwrap();
        assert!(matches!(
            units(&[missing], &[], Some(&db)),
            Err(ConjureError::NotInDatabase(_))
        ));
        std::fs::write(&db, "{}").unwrap();
        assert!(matches!(
            units(&[], &[], Some(&db)),
            Err(ConjureError::Database { .. })
        ));
    }

    #[test]
    fn files_without_a_database_take_the_given_flags() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.c");
        std::fs::write(&a, "").unwrap();
        let flags = vec!["-I".to_string(), "x".to_string()];
        let got = units(std::slice::from_ref(&a), &flags, None).unwrap();
        assert_eq!(got[0].flags, flags);
        assert!(matches!(
            units(&[], &flags, None),
            Err(ConjureError::NoFiles)
        ));
        assert!(matches!(
            units(&[dir.path().join("none.c")], &flags, None),
            Err(ConjureError::NoFile(_))
        ));
    }
}
