//! Code shared by the static guest programs under test (ringbuf-tool, pm-probe).

pub mod dax;
