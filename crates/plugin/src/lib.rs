//! Persim's QEMU TCG plugin: records every access to the emulated PM, the flushes and
//! fences around them and the test's hypercalls, from `hypercall start` to `success` or
//! `fail`, into a Persim trace (docs/design/tracer.md).
//!
//! Before `start` only `cpuid` is instrumented (to see the hypercall); at `start` the
//! translation cache is flushed so that every block is retranslated with instrumentation.
//! The counting mode (`count=on`) instruments from the moment QEMU loads it instead, and
//! zeroes its counts at `start`.

// Parts used only by the QEMU glue look unused in the unit-test build.
#![cfg_attr(test, allow(dead_code))]

mod calls;
mod counter;
mod decode;
mod hypercall;
mod nvme;
mod physical;
// The QEMU API is resolved from the QEMU process that loads the plugin, so the glue is left
// out of the unit-test executable, which runs without QEMU.
#[cfg(not(test))]
mod qemu;
mod stack;
mod string_stores;
mod task;
mod tracer;
