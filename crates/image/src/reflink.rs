//! Reflinks (`ioctl(FICLONE)`): a new file sharing all blocks of an existing one until
//! either is written. XFS and btrfs support them; ext4 and tmpfs do not.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use rustix::io::Errno;

use persim_trace::atomic_file::temporary_path;

/// Makes `dst` (an empty file) share the contents of `src`.
pub(crate) fn clone_file(dst: &File, src: &File) -> io::Result<()> {
    rustix::fs::ioctl_ficlone(dst, src).map_err(io::Error::from)
}

/// Whether files in `dir` can be reflinked, found by trying on two temporary files.
pub(crate) fn supported_in(dir: &Path) -> io::Result<bool> {
    let src_path = temporary_path(&dir.join("reflink-probe"))?;
    let dst_path = temporary_path(&dir.join("reflink-probe"))?;
    let result = (|| {
        let src = File::create_new(&src_path)?;
        src.set_len(4096)?;
        let dst = File::create_new(&dst_path)?;
        match rustix::fs::ioctl_ficlone(&dst, &src) {
            Ok(()) => Ok(true),
            Err(Errno::OPNOTSUPP | Errno::XDEV | Errno::INVAL | Errno::NOTTY) => Ok(false),
            Err(e) => Err(io::Error::from(e)),
        }
    })();
    // Best effort cleanup; the probe result is what matters.
    let _ = fs::remove_file(&src_path);
    let _ = fs::remove_file(&dst_path);
    result.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot probe reflink support in {}: {e}", dir.display()),
        )
    })
}
