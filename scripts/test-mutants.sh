#!/usr/bin/env bash
# Builds each deliberately broken ring buffer ("mutant", docs/ringbuf.md) and checks that
# the in-process crash-consistency tests catch it: under a mutant feature, the
# crash_consistency test target passes only if the crash model finds the violation that
# mutant must produce. Exits non-zero unless every mutant is caught.
set -uo pipefail
cd "$(dirname "$0")/.."

mutants=(mutant-no-first-fence mutant-no-second-fence mutant-no-zero-next-header)
missed=()
for mutant in "${mutants[@]}"; do
    echo "== $mutant"
    if cargo test -p persim-ringbuf --release --features "$mutant" --test crash_consistency \
        -- --nocapture; then
        echo "== $mutant: caught"
    else
        echo "== $mutant: NOT caught (or the build failed); see the output above"
        missed+=("$mutant")
    fi
done

if ((${#missed[@]} > 0)); then
    echo "mutants not caught: ${missed[*]}" >&2
    exit 1
fi
echo "all ${#mutants[@]} mutants caught"
