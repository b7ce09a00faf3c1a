//! A writer for the "newc" cpio format the kernel unpacks as an initramfs. Every entry gets
//! mtime 0, uid/gid 0 and a fixed inode number sequence, so the archive depends only on the
//! entries and their order.

use std::io::{self, Write};

pub struct CpioWriter<W: Write> {
    out: W,
    written: u64,
    next_ino: u32,
}

const MODE_DIR: u32 = 0o040000;
const MODE_FILE: u32 = 0o100000;

impl<W: Write> CpioWriter<W> {
    pub fn new(out: W) -> Self {
        CpioWriter {
            out,
            written: 0,
            next_ino: 1,
        }
    }

    pub fn dir(&mut self, path: &str) -> io::Result<()> {
        self.entry(path, MODE_DIR | 0o755, 2, &[])
    }

    pub fn file(&mut self, path: &str, executable: bool, data: &[u8]) -> io::Result<()> {
        let perm = if executable { 0o755 } else { 0o644 };
        self.entry(path, MODE_FILE | perm, 1, data)
    }

    /// Writes the trailer and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.entry("TRAILER!!!", 0, 1, &[])?;
        Ok(self.out)
    }

    fn entry(&mut self, path: &str, mode: u32, nlink: u32, data: &[u8]) -> io::Result<()> {
        let name = path.trim_start_matches('/');
        let ino = self.next_ino;
        self.next_ino += 1;
        let fields = [
            ino,
            mode,
            0,
            0,
            nlink,
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        let mut header = String::from("070701");
        for field in fields {
            header.push_str(&format!("{field:08X}"));
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let fill = (4 - self.written % 4) % 4;
        self.put(&[0; 3][..fill as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn archive() -> Vec<u8> {
        let mut w = CpioWriter::new(Vec::new());
        w.dir("/bin").unwrap();
        w.file("/bin/hello", true, b"#!/bin/sh\necho hi\n").unwrap();
        w.file("/bin/empty", false, b"").unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn same_entries_give_the_same_bytes() {
        assert_eq!(archive(), archive());
        assert_eq!(archive().len() % 4, 0);
    }

    /// Cross-checks the format against the system's cpio when it is installed.
    #[test]
    fn system_cpio_lists_the_entries() {
        let Ok(mut child) = Command::new("cpio")
            .args(["-it", "--quiet"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        else {
            eprintln!("cpio not installed: format cross-check skipped");
            return;
        };
        child.stdin.take().unwrap().write_all(&archive()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "bin\nbin/hello\nbin/empty\n"
        );
    }
}
