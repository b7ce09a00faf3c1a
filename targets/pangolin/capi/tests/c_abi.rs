//! The C ABI as a C program uses it: tests/c/list.c, compiled with `cc` against
//! include/pangolin.h and linked with libpangolin.so, run on a pool file, then
//! run again on the file with a page lost.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding libpangolin.so as built for this test: `deps`, beside the
/// test binary (the copy one level up is only refreshed by `cargo build`).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().expect("target/<profile>/deps").to_path_buf()
}

/// Compiles tests/c/`name`.c into `dir` against libpangolin; returns the program.
fn compile(name: &str, dir: &Path) -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lib = library_dir();
    assert!(
        lib.join("libpangolin.so").exists(),
        "no libpangolin.so in {}",
        lib.display()
    );
    let program = dir.join(name);
    let status = Command::new("cc")
        .args(["-std=c11", "-pthread", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&program)
        .arg(manifest.join(format!("tests/c/{name}.c")))
        .arg("-I")
        .arg(manifest.join("include"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lpangolin")
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc failed");
    program
}

#[test]
fn two_pthreads_run_their_own_transactions_on_one_pool() {
    let dir = tempfile::tempdir().unwrap();
    let program = compile("threads", dir.path());
    let output = Command::new(&program)
        .arg(dir.path().join("pool"))
        .env("PGL_ACCESS", "eadr")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "threads failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
}

#[test]
fn a_c_program_builds_reopens_and_updates_a_list() {
    let dir = tempfile::tempdir().unwrap();
    let program = compile("list", dir.path());
    let pool = dir.path().join("pool");
    let output = Command::new(&program)
        .arg(&pool)
        .env("PGL_ACCESS", "eadr")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "list failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ok\n");
    // The first page of the first zone (after two metadata pages and four lanes of two 256 KiB log copies)
    // holds the bitmap, the root and the list: lose it, as a poisoned page reads.
    let mut bytes = std::fs::read(&pool).unwrap();
    let zone = 2 * 4096 + 2 * (1 << 20);
    assert!(bytes[zone..zone + 4096].iter().any(|&b| b != 0));
    bytes[zone..zone + 4096].fill(0);
    std::fs::write(&pool, &bytes).unwrap();
    let check = Command::new(&program)
        .arg("check")
        .arg(&pool)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "list check failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&check.stdout), "ok\n");
    let again = Command::new(&program).arg(&pool).output().unwrap();
    assert_eq!(
        again.status.code(),
        Some(1),
        "creating over an existing pool must fail"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("must not exist"));
}
