#!/usr/bin/env bash
# Measures the tracer (docs/results/performance.md, "## Tracer"): traced hello-world on ext4-DAX
# from VM start to end, and the guest time of a 16 MiB write workload after
# `hypercall start` with tracing on vs the plugin loaded with tracing off (best of 3 each,
# and the median of QEMU's CPU time);
# then the same workload on ext4 on the NVMe SSD, synced (the plugin decoding the driver's
# commands).
# Needs the artifacts of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p persim-plugin
cargo guest-tools
for bench in bench_tracer_overhead bench_nvme_tracing; do
    cargo test --release -p persim-vm --test guest "$bench" -- --ignored --nocapture 2>&1 |
        grep -v '^persim trace:'
done
