#!/usr/bin/env bash
# Runs every Persim test: formatting, lints, unit, property and end-to-end tests.
# Installs what the tests need first (scripts/setup.sh, idempotent), so it works on a
# fresh machine; CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --no-main-job

step() { echo "== $*"; }

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --release -- -D warnings

step "cargo test"
cargo test --workspace --release

step "ring buffer and ZIL-PMEM mutants must be caught"
bash scripts/test-mutants.sh
