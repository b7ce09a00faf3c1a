//! Runs the built user-maps on real programs of this machine.

use std::process::Command;

fn user_maps() -> Command {
    Command::new(env!("CARGO_BIN_EXE_user-maps"))
}

#[test]
fn record_follows_children_keeps_the_exit_status_and_symbols_name_their_functions() {
    let dir = tempfile::tempdir().unwrap();
    let maps = dir.path().join("maps");
    // The shell forks `cat`, whose exit comes before the shell's own.
    let status = user_maps()
        .arg("record")
        .arg(&maps)
        .args(["--", "sh", "-c", "cat /dev/null; exit 3"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    let recorded = std::fs::read_to_string(&maps).unwrap();
    let cat = std::fs::canonicalize(which("cat")).unwrap();
    let sh = std::fs::canonicalize(which("sh")).unwrap();
    for program in [&cat, &sh] {
        assert!(
            recorded.contains(&format!(" {}\n", program.display())),
            "{} not in\n{recorded}",
            program.display()
        );
    }
    assert!(recorded.contains("/libc.so.6\n"), "{recorded}");

    let out = user_maps().arg("symbols").arg(&maps).output().unwrap();
    assert!(out.status.success());
    let symbols = String::from_utf8(out.stdout).unwrap();
    // libc keeps its exported functions in the dynamic symbol table: `write` is one,
    // inside libc's recorded code mapping.
    let libc = recorded
        .lines()
        .find(|l| l.ends_with("/libc.so.6"))
        .map(|l| {
            l.split_whitespace()
                .next()
                .unwrap()
                .split_once('-')
                .unwrap()
        })
        .map(|(s, e)| {
            (
                u64::from_str_radix(s, 16).unwrap(),
                u64::from_str_radix(e, 16).unwrap(),
            )
        })
        .unwrap();
    let write = symbols
        .lines()
        .find(|l| l.contains(" t write [libc.so.6] @"))
        .unwrap_or_else(|| panic!("no write in libc's symbols"));
    let address = u64::from_str_radix(write.split_whitespace().next().unwrap(), 16).unwrap();
    assert!(
        (libc.0..libc.1).contains(&address),
        "{write} outside {libc:x?}"
    );
}

#[test]
fn the_command_gets_the_default_sigpipe_and_not_the_tools_ignored_one() {
    // With SIGPIPE ignored (the tool's own runtime), `yes | head` never ends in busybox.
    let dir = tempfile::tempdir().unwrap();
    let status = user_maps()
        .arg("record")
        .arg(dir.path().join("maps"))
        .args(["--", "sh", "-c", "kill -PIPE $$; exit 0"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(128 + 13));
}

#[test]
fn a_command_ended_by_a_signal_exits_as_a_shell_says() {
    let dir = tempfile::tempdir().unwrap();
    let status = user_maps()
        .arg("record")
        .arg(dir.path().join("maps"))
        .args(["--", "sh", "-c", "kill -9 $$"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(128 + 9));
}

fn which(program: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} not on PATH"))
}

#[test]
fn a_background_process_does_not_keep_the_command_from_ending() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let status = user_maps()
        .arg("record")
        .arg(dir.path().join("maps"))
        .args(["--", "sh", "-c"])
        .arg(format!("sleep 600 & echo $! >{}", pid_file.display()))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    // The command ended while its background `sleep` still runs.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let proc_dir = std::path::Path::new("/proc").join(pid.trim());
    assert!(proc_dir.exists(), "the background process was waited for");
    let _ = Command::new("kill").arg(pid.trim()).status();
}
