//! The guest machine as the host builds it and the tracing plugin assumes it.

/// Guest-physical base of the NVDIMM: QEMU's pc machine puts hot-pluggable device memory
/// at 4 GiB when all RAM fits below the PCI hole, and the only NVDIMM is plugged first.
/// The host passes it to the plugin (`pm_base`) and checks it against what the guest
/// kernel reports before tracing starts.
pub const PM_BASE: u64 = 1 << 32;

/// Must be on the guest kernel's command line. With KASLR the kernel would place its
/// direct map of physical memory at a random address; the plugin maps the virtual
/// address of a flush (`clwb`, `clflushopt`, `clflush`) to PM through [`DIRECT_MAP_BASE`]
/// when it has not seen that page accessed yet, and QEMU's plugin API (v4) cannot
/// translate virtual addresses itself.
pub const KERNEL_NOKASLR: &str = "nokaslr";

/// Must be on the guest kernel's command line too: with 5-level paging (which QEMU's
/// `-cpu max` offers) the direct map starts elsewhere than [`DIRECT_MAP_BASE`].
pub const KERNEL_4_LEVEL_PAGING: &str = "no5lvl";

/// The x86-64 kernel's direct map of all physical memory with [`KERNEL_NOKASLR`] and
/// 4-level paging: physical address `p` is virtual `DIRECT_MAP_BASE + p`.
pub const DIRECT_MAP_BASE: u64 = 0xffff_8880_0000_0000;
/// Its extent (64 TiB).
pub const DIRECT_MAP_SIZE: u64 = 64 << 40;
