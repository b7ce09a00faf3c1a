//! Builds the guest's initramfs from installed packages (busybox-static, kernel modules,
//! file-system tools with their shared libraries) and Persim's static guest tools, and
//! caches it under the content hash of all inputs.

use crate::cpio::CpioWriter;
use crate::error::VmError;
use crate::kernel::Kernel;
use persim_trace::atomic_file::write_atomically;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const INIT_SCRIPT: &str = include_str!("init.sh");
/// Attaches and detaches the NVDIMM (fsdax at boot; image swaps for state extraction).
const PMEM_SCRIPT: &str = include_str!("extract/pmem.sh");
/// Bumped when the archive layout changes, so old cache entries are not reused.
const LAYOUT_VERSION: &str = "persim-initramfs-1";
const TOOL_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

pub struct InitramfsSpec<'a> {
    pub kernel: &'a Kernel,
    pub modules: &'a [String],
    pub tools: &'a [String],
    /// Static binaries installed as /bin/<file name>.
    pub guest_tools: &'a [PathBuf],
    pub busybox: &'a Path,
}

/// The host file of each guest program whose path in the guest differs from its host
/// path (a program listed by path, installed as `/bin/NAME`; Persim's guest tools): the
/// symbols file names the host's, where the host reads line tables.
pub fn host_files(spec: &InitramfsSpec) -> Result<BTreeMap<String, PathBuf>, VmError> {
    let mut files = BTreeMap::new();
    for tool in spec.guest_tools {
        files.insert(format!("/bin/{}", file_name(tool)), tool.clone());
    }
    for tool in spec.tools {
        let (path, guest_path) = locate_tool(tool)?;
        files.insert(guest_path, std::path::absolute(&path).unwrap_or(path));
    }
    Ok(files)
}

/// The host files of the `tools` programs and of their shared libraries, each once: the
/// ELF files whose functions the guest's programs run.
pub(crate) fn tool_files(tools: &[String]) -> Result<Vec<PathBuf>, VmError> {
    let mut files = Vec::new();
    for tool in tools {
        let (path, _) = locate_tool(tool)?;
        for file in std::iter::once(path.clone()).chain(shared_libraries(&path)?) {
            if !files.contains(&file) {
                files.push(file);
            }
        }
    }
    Ok(files)
}

/// Returns the path of the cached initramfs for `spec`, building it if needed.
pub fn build_cached(spec: &InitramfsSpec, cache_dir: &Path) -> Result<PathBuf, VmError> {
    let files = collect_files(spec)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(LAYOUT_VERSION.as_bytes());
    for (guest_path, file) in &files {
        hasher.update(guest_path.as_bytes());
        hasher.update(&[0, file.executable as u8]);
        hasher.update(&(file.data.len() as u64).to_le_bytes());
        hasher.update(&file.data);
    }
    let hash = hasher.finalize().to_hex();
    let path = cache_dir.join(format!("initramfs-{}.cpio", &hash[..32]));
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(cache_dir).map_err(|e| {
        VmError::io(
            format!("creating cache directory {}", cache_dir.display()),
            e,
        )
    })?;
    let bytes = write_archive(&files).map_err(|e| VmError::io("writing the initramfs", e))?;
    // Concurrent builds (threads or processes) never see half a file.
    write_atomically(&path, &bytes)
        .map_err(|e| VmError::io(format!("writing {}", path.display()), e))?;
    Ok(path)
}

struct GuestFile {
    data: Vec<u8>,
    executable: bool,
}

/// Every file of the archive by guest path, in a fixed order.
fn collect_files(spec: &InitramfsSpec) -> Result<BTreeMap<String, GuestFile>, VmError> {
    let mut files = BTreeMap::new();
    let exe = |data| GuestFile {
        data,
        executable: true,
    };
    files.insert("/init".to_owned(), exe(INIT_SCRIPT.as_bytes().to_vec()));
    files.insert(
        "/bin/persim-pmem".to_owned(),
        exe(PMEM_SCRIPT.as_bytes().to_vec()),
    );
    files.insert(
        "/bin/busybox".to_owned(),
        exe(read_input(spec.busybox, "busybox-static")?),
    );

    let mut module_names = String::new();
    for module in spec.kernel.resolve_modules(spec.modules)? {
        let name = file_name(&module)
            .trim_end_matches(".xz")
            .trim_end_matches(".zst")
            .to_owned();
        module_names.push_str(&name);
        module_names.push('\n');
        files.insert(
            format!("/lib/persim-modules/{name}"),
            GuestFile {
                data: read_module(&module)?,
                executable: false,
            },
        );
    }
    files.insert(
        "/etc/persim/modules".to_owned(),
        GuestFile {
            data: module_names.into_bytes(),
            executable: false,
        },
    );

    for tool in spec.guest_tools {
        files.insert(
            format!("/bin/{}", file_name(tool)),
            exe(read_input(tool, "a Persim guest tool")?),
        );
    }
    for tool in spec.tools {
        let (path, guest_path) = locate_tool(tool)?;
        if files.contains_key(&guest_path) {
            return Err(VmError::Missing {
                what: format!("a free name for program {tool} ({guest_path} is Persim's own)"),
                hint: "rename the program listed under `tools` in the VM configuration".to_owned(),
            });
        }
        for lib in shared_libraries(&path)? {
            let data = read_input(&lib, "a shared library")?;
            files.insert(lib.display().to_string(), exe(data));
        }
        files.insert(guest_path, exe(read_input(&path, tool)?));
    }
    Ok(files)
}

fn write_archive(files: &BTreeMap<String, GuestFile>) -> std::io::Result<Vec<u8>> {
    let mut dirs: BTreeSet<String> = ["/dev", "/proc", "/sys", "/tmp", "/mnt"]
        .map(str::to_owned)
        .into();
    for path in files.keys() {
        let mut parent = Path::new(path).parent();
        while let Some(dir) = parent.filter(|d| *d != Path::new("/")) {
            dirs.insert(dir.display().to_string());
            parent = dir.parent();
        }
    }
    let mut w = CpioWriter::new(Vec::new());
    // BTreeSet order puts every parent before its children.
    for dir in &dirs {
        w.dir(dir)?;
    }
    for (path, file) in files {
        w.file(path, file.executable, &file.data)?;
    }
    w.finish()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_input(path: &Path, what: &str) -> Result<Vec<u8>, VmError> {
    std::fs::read(path).map_err(|e| VmError::Missing {
        what: format!("{what} at {} ({e})", path.display()),
        hint: "run `sudo scripts/setup.sh` to install and build the guest components".to_owned(),
    })
}

/// Module files as insmod needs them: compressed ones are unpacked on the host, because
/// busybox insmod cannot.
fn read_module(path: &Path) -> Result<Vec<u8>, VmError> {
    let tool = match path.extension().and_then(|e| e.to_str()) {
        Some("xz") => "xz",
        Some("zst") => "zstd",
        _ => return read_input(path, "a kernel module"),
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .map_err(|e| VmError::io(format!("running `{tool} -dc {}`", path.display()), e))?;
    if !out.status.success() {
        return Err(VmError::io(
            format!("decompressing {}", path.display()),
            std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
        ));
    }
    Ok(out.stdout)
}

/// A `tools` entry's host file and its path in the guest: a name is searched in
/// [`TOOL_DIRS`] and keeps its path; a path (it has a `/`) is the user's own program,
/// installed as /bin/<file name>, first on the guest's PATH.
fn locate_tool(tool: &str) -> Result<(PathBuf, String), VmError> {
    let missing = |hint: &str| VmError::Missing {
        what: format!("program `{tool}` (listed under `tools` in the VM configuration)"),
        hint: hint.to_owned(),
    };
    if crate::config::is_path(tool) {
        let path = PathBuf::from(tool);
        if !path.is_file() {
            return Err(missing(
                "check the path (a relative one is relative to the configuration file)",
            ));
        }
        let guest_path = format!("/bin/{}", file_name(&path));
        return Ok((path, guest_path));
    }
    let path = TOOL_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            missing(
                "install its Debian package (scripts/setup.sh installs e2fsprogs and xfsprogs), \
                 or write a path (`./NAME`, relative to the configuration file) for a program \
                 of your own",
            )
        })?;
    let guest_path = path.display().to_string();
    Ok((path, guest_path))
}

/// The shared libraries (and the dynamic loader) a program needs, as `ldd` resolves them.
fn shared_libraries(program: &Path) -> Result<Vec<PathBuf>, VmError> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|e| VmError::io(format!("running `ldd {}`", program.display()), e))?;
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, resolved)) => resolved.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_libraries_and_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
            \tlibuuid.so.1 => /lib/x86_64-linux-gnu/libuuid.so.1 (0x00007f99)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f99)\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f99)\n\
            \tnot a dynamic executable\n";
        assert_eq!(
            parse_ldd(text),
            [
                "/lib/x86_64-linux-gnu/libuuid.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    fn fake_kernel(dir: &Path) -> Kernel {
        std::fs::create_dir_all(dir.join("kernel")).unwrap();
        std::fs::write(
            dir.join("modules.dep"),
            "kernel/a.ko: kernel/b.ko\nkernel/b.ko:\n",
        )
        .unwrap();
        std::fs::write(dir.join("kernel/a.ko"), "module a").unwrap();
        std::fs::write(dir.join("kernel/b.ko"), "module b").unwrap();
        Kernel {
            image: dir.join("vmlinuz"),
            modules_dir: Some(dir.to_owned()),
            system_map: None,
        }
    }

    /// The archive built for `tools` on the fake kernel, as text (file names and contents).
    fn archive_with_tools(dir: &Path, tools: &[String]) -> Result<String, VmError> {
        let kernel = fake_kernel(&dir.join("kernel"));
        let busybox = dir.join("busybox");
        std::fs::write(&busybox, "busybox").unwrap();
        let hypercall = dir.join("hypercall");
        std::fs::write(&hypercall, "persim hypercall").unwrap();
        let spec = InitramfsSpec {
            kernel: &kernel,
            modules: &[],
            tools,
            guest_tools: &[hypercall],
            busybox: &busybox,
        };
        let path = build_cached(&spec, &dir.join("cache"))?;
        Ok(String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned())
    }

    #[test]
    fn a_program_by_path_goes_to_bin_with_its_libraries() {
        let dir = tempfile::tempdir().unwrap();
        // a dynamically linked program of the user's, and a script
        let program = dir.path().join("my-checker");
        std::fs::copy("/bin/true", &program).unwrap();
        let script = dir.path().join("sub/my-recover.sh");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "#!/bin/sh\necho recovered\n").unwrap();
        let tools = [program, script].map(|p| p.display().to_string());
        let text = archive_with_tools(dir.path(), &tools).unwrap();
        assert!(
            text.contains("bin/my-checker\0"),
            "the program under its file name"
        );
        assert!(text.contains("bin/my-recover.sh\0") && text.contains("echo recovered"));
        assert!(text.contains("libc.so.6\0"), "its shared libraries");
        assert!(
            !text.contains(&dir.path().display().to_string()),
            "no host paths"
        );
    }

    #[test]
    fn a_missing_or_clashing_program_path_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-program").display().to_string();
        let e = archive_with_tools(dir.path(), &[missing])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no-such-program") && e.contains("`tools`"),
            "{e}"
        );
        let clash = dir.path().join("own/hypercall");
        std::fs::create_dir_all(clash.parent().unwrap()).unwrap();
        std::fs::write(&clash, "not Persim's").unwrap();
        let e = archive_with_tools(dir.path(), &[clash.display().to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("/bin/hypercall is Persim's own"), "{e}");
    }

    #[test]
    fn cache_is_reused_until_an_input_changes() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = fake_kernel(dir.path());
        let busybox = dir.path().join("busybox");
        std::fs::write(&busybox, "busybox v1").unwrap();
        let tool = dir.path().join("hypercall");
        std::fs::write(&tool, "tool v1").unwrap();
        let modules = ["a".to_owned()];
        let guest_tools = [tool.clone()];
        let spec = InitramfsSpec {
            kernel: &kernel,
            modules: &modules,
            tools: &[],
            guest_tools: &guest_tools,
            busybox: &busybox,
        };
        let cache = dir.path().join("cache");
        let first = build_cached(&spec, &cache).unwrap();
        let bytes = std::fs::read(&first).unwrap();
        assert_eq!(build_cached(&spec, &cache).unwrap(), first);
        std::fs::write(&tool, "tool v2").unwrap();
        let second = build_cached(&spec, &cache).unwrap();
        assert_ne!(second, first);
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("lib/persim-modules/b.ko") && text.contains("b.ko\na.ko\n"),
            "dependency order"
        );
        assert!(text.contains("bin/hypercall") && text.contains("tool v1"));
    }
}
