//! Reading a file that QEMU's command line hands the guest (`-fw_cfg name=…,string=…`)
//! through the fw_cfg I/O ports, from user space.
//!
//! Why ports and not the kernel's `/sys/firmware/qemu_fw_cfg`: that driver lists the files
//! once, at boot. A guest restored from a booted snapshot runs in a QEMU whose fw_cfg holds
//! files the booted one did not (the commands of its first test), and only a fresh read of
//! the file directory sees them. Port reads are synchronous device accesses, so under
//! `-icount` they happen at the same instruction in every run.
//!
//! Interface (QEMU's docs/specs/fw_cfg.rst): a 16-bit write of a key to the selector port
//! 0x510 selects an item and rewinds it; each 8-bit read of the data port 0x511 returns its
//! next byte. Item 0x19 is the file directory: a big-endian u32 count, then per file a
//! big-endian u32 size, a big-endian u16 key, two reserved bytes and a 56-byte name.

/// The selector port; the data port follows it.
pub const SELECTOR_PORT: u16 = 0x510;
const DIRECTORY_KEY: u16 = 0x19;
const ENTRY_LEN: usize = 64;
const NAME_LEN: usize = 56;
/// More entries than any QEMU machine has: a count beyond it is a torn read.
const MAX_FILES: u32 = 4096;

/// fw_cfg's two ports.
pub trait Ports {
    /// Selects the item `key` and rewinds it.
    fn select(&mut self, key: u16);
    /// Reads the selected item's next `buf.len()` bytes.
    fn read(&mut self, buf: &mut [u8]);
}

/// The key and size of the file `name`, if the directory has it.
pub fn find(ports: &mut impl Ports, name: &str) -> Option<(u16, usize)> {
    ports.select(DIRECTORY_KEY);
    let mut count = [0; 4];
    ports.read(&mut count);
    let count = u32::from_be_bytes(count).min(MAX_FILES);
    let mut entry = [0; ENTRY_LEN];
    for _ in 0..count {
        ports.read(&mut entry);
        let stored = &entry[8..8 + NAME_LEN];
        let len = stored.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        if &stored[..len] == name.as_bytes() {
            let size = u32::from_be_bytes(entry[0..4].try_into().expect("4 bytes"));
            let key = u16::from_be_bytes(entry[4..6].try_into().expect("2 bytes"));
            return Some((key, size as usize));
        }
    }
    None
}

/// The contents of the file `name`, if the directory has it. The directory is read twice
/// and must agree: a guest saved in the middle of a directory read goes on, after its
/// restore, with the bytes of another QEMU's directory, once.
pub fn read_file(ports: &mut impl Ports, name: &str) -> Option<Vec<u8>> {
    let found = find(ports, name)?;
    if find(ports, name) != Some(found) {
        return None;
    }
    let (key, size) = found;
    ports.select(key);
    let mut contents = vec![0; size];
    ports.read(&mut contents);
    Some(contents)
}

/// The ports of the machine, through `ioperm` (the guest runs as root).
#[cfg(target_arch = "x86_64")]
pub struct MachinePorts(());

#[cfg(target_arch = "x86_64")]
impl MachinePorts {
    /// Asks the kernel for access to the two ports.
    pub fn open() -> std::io::Result<MachinePorts> {
        // SAFETY: ioperm only changes this process's I/O permission bitmap.
        if unsafe { libc::ioperm(SELECTOR_PORT.into(), 2, 1) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(MachinePorts(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl Ports for MachinePorts {
    fn select(&mut self, key: u16) {
        // SAFETY: `open` made the selector port accessible; writing it has no effect on
        // this process's memory.
        unsafe {
            std::arch::asm!("out dx, ax", in("dx") SELECTOR_PORT, in("ax") key,
                options(nomem, nostack, preserves_flags));
        }
    }

    fn read(&mut self, buf: &mut [u8]) {
        for byte in buf {
            let value: u8;
            // SAFETY: as in `select`, for the data port.
            unsafe {
                std::arch::asm!("in al, dx", in("dx") SELECTOR_PORT + 1, out("al") value,
                    options(nomem, nostack, preserves_flags));
            }
            *byte = value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fw_cfg's items in memory, as QEMU serves them.
    struct FakePorts {
        items: Vec<(u16, Vec<u8>)>,
        selected: Vec<u8>,
        offset: usize,
    }

    impl FakePorts {
        fn with_files(files: &[(&str, &[u8])]) -> FakePorts {
            let mut directory = (files.len() as u32).to_be_bytes().to_vec();
            let mut items = Vec::new();
            for (i, (name, contents)) in files.iter().enumerate() {
                let key = 0x20 + i as u16;
                directory.extend((contents.len() as u32).to_be_bytes());
                directory.extend(key.to_be_bytes());
                directory.extend([0, 0]);
                let mut stored = name.as_bytes().to_vec();
                stored.resize(NAME_LEN, 0);
                directory.extend(stored);
                items.push((key, contents.to_vec()));
            }
            items.push((DIRECTORY_KEY, directory));
            FakePorts {
                items,
                selected: Vec::new(),
                offset: 0,
            }
        }
    }

    impl Ports for FakePorts {
        fn select(&mut self, key: u16) {
            self.selected = self
                .items
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            self.offset = 0;
        }

        fn read(&mut self, buf: &mut [u8]) {
            for byte in buf {
                // Past the end of an item QEMU reads zeros.
                *byte = self.selected.get(self.offset).copied().unwrap_or(0);
                self.offset += 1;
            }
        }
    }

    #[test]
    fn a_named_file_is_found_among_others_and_read_whole() {
        let mut ports = FakePorts::with_files(&[
            ("etc/boot-fail-wait", &[0, 0, 0, 0]),
            ("opt/persim/commands", b"@@RUN 0\nZWNobw==\n.\n"),
            ("opt/persim/commandsX", b"other"),
        ]);
        assert_eq!(find(&mut ports, "opt/persim/commands"), Some((0x21, 19)));
        assert_eq!(
            read_file(&mut ports, "opt/persim/commands").as_deref(),
            Some(&b"@@RUN 0\nZWNobw==\n.\n"[..])
        );
        assert_eq!(
            read_file(&mut ports, "opt/persim/commandsX").as_deref(),
            Some(&b"other"[..])
        );
    }

    #[test]
    fn a_missing_file_or_an_empty_directory_is_none() {
        let mut ports = FakePorts::with_files(&[("etc/boot-fail-wait", &[0; 4])]);
        assert_eq!(read_file(&mut ports, "opt/persim/commands"), None);
        assert_eq!(read_file(&mut ports, "opt/persim"), None);
        let mut empty = FakePorts::with_files(&[]);
        assert_eq!(read_file(&mut empty, "opt/persim/commands"), None);
    }

    /// A directory whose entry changes between two reads, as after a restore mid-read.
    struct TornPorts {
        reads: [FakePorts; 2],
        directory_reads: usize,
    }

    impl Ports for TornPorts {
        fn select(&mut self, key: u16) {
            if key == DIRECTORY_KEY {
                self.directory_reads += 1;
            }
            let i = usize::from(self.directory_reads > 1);
            self.reads[i].select(key);
        }

        fn read(&mut self, buf: &mut [u8]) {
            let i = usize::from(self.directory_reads > 1);
            self.reads[i].read(buf);
        }
    }

    #[test]
    fn directories_that_differ_between_two_reads_are_not_trusted() {
        let mut torn = TornPorts {
            reads: [
                FakePorts::with_files(&[("opt/persim/commands", b"short")]),
                FakePorts::with_files(&[("etc/x", b""), ("opt/persim/commands", b"longer")]),
            ],
            directory_reads: 0,
        };
        assert_eq!(read_file(&mut torn, "opt/persim/commands"), None);
        // The next try reads a stable directory.
        assert_eq!(
            read_file(&mut torn, "opt/persim/commands").as_deref(),
            Some(&b"longer"[..])
        );
    }

    #[test]
    fn a_name_of_all_56_bytes_has_no_terminator() {
        let name = "opt/".to_owned() + &"n".repeat(NAME_LEN - 4);
        let mut ports = FakePorts::with_files(&[(&name, b"x")]);
        assert_eq!(read_file(&mut ports, &name).as_deref(), Some(&b"x"[..]));
    }
}
