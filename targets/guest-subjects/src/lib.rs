//! Code shared by the static guest programs under test (ringbuf-tool, zil-pmem-tool,
//! pm-probe).

pub mod dax;
pub mod options;
