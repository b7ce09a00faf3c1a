//! The one preflight of every VM test, in every crate (feature `testing`).

use crate::boot::Artifacts;
use crate::config::VmConfig;
use crate::kernel::Kernel;
use crate::qemu::check_version;

/// This source tree's build, when QEMU, the configuration's kernel and the build are all
/// here; otherwise the test `test` is skipped with the reason, except under CI (`CI` set),
/// where the VM tests must run and this panics.
pub fn vm_ready(test: &str, config: &VmConfig) -> Option<Artifacts> {
    let ready = check_version()
        .and_then(|_| Kernel::for_config(config))
        .and_then(|_| Artifacts::of_source_tree());
    match ready {
        Ok(artifacts) => Some(artifacts),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("{test}: {e}; CI must run the VM tests: run scripts/setup.sh")
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: {e} (run scripts/setup.sh)");
            None
        }
    }
}
