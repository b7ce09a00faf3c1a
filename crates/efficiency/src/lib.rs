//! Efficiency measurements (`persim efficiency`, docs/guides/efficiency.md): what writing a GiB
//! costs a storage stack in CPU time and energy, with the real fio as the workload.
//!
//! No VM knowledge here: the guest's series (`--vm`) is the tester's, which runs fio in
//! Persim's guest and reads it back with this crate's [`fio`] parser.
//!
//! - [`cpu_time`]: `/proc/stat`'s system-wide CPU time
//! - [`powercap`]: RAPL energy counters; [`power`]: `--power` (RAPL, a meter, none)
//! - [`sampling`]: both sampled while fio runs, averaged over a window
//! - [`fio`]: the job, its command line, fio's version and JSON output; [`fio_run`]: fio
//!   run in a directory of its own that is always removed
//! - [`target`]: the targets' checks, [`device_target`] a raw device's; [`numa`]: the
//!   `--numa-node` pinning; [`machine_info`]: what it was measured on
//! - [`series`]: the host series; [`results`] and [`plots`]: its files

pub mod cpu_time;
pub mod device_target;
pub mod fio;
pub mod fio_run;
pub mod interrupt;
pub mod machine_info;
pub mod numa;
pub mod plots;
pub mod power;
pub mod powercap;
pub mod results;
pub mod sampling;
pub mod series;
pub mod target;
