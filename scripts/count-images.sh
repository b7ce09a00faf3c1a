#!/usr/bin/env bash
# Counts the distinct crash images each strategy makes for every test of the fs suite,
# without recovering them all (docs/results/results.md, "The recovery-guided strategy reads"):
# a `reads` run with --max-images 2 records the read sets of the fully persisted images,
# then `persim images` counts program-order, global-prefix and reads on the same trace.
#   scripts/count-images.sh FS CACHE [OUT_DIR]      e.g. scripts/count-images.sh ext4 volatile
# Prints one line per test: "test po=N gp=N reads=N" (N = images, then sampled failure points).
set -euo pipefail
cd "$(dirname "$0")/.."
fs=${1:?usage: $0 FS CACHE [OUT_DIR]} cache=${2:?usage: $0 FS CACHE [OUT_DIR]}
out=${3:-target/count-images}
persim=target/release/persim
count() {
    "$persim" images "$1" --cache "$cache" --from-checkpoint 1 --json -q "${@:2}" |
        python3 -c 'import json, sys; d = json.load(sys.stdin); print(len(d["images"]), sum(p["incomplete"] for p in d["failure_points"]))'
}
for file in suites/fs/*.toml; do
    test=$(basename "$file" .toml)
    dir=$out/$fs-$cache-$test
    rm -rf "$dir"
    # exit code 1 (violations) is a result; only 2 (the tool failed) stops the count
    "$persim" run --fs "$fs" --test "$test" --cache "$cache" --strategy reads --max-images 2 \
        --nt-prefixes off --out "$dir" -q >/dev/null || [[ $? -eq 1 ]]
    trace=$dir/trace.ptrace
    echo "$test po=$(count "$trace" --strategy program-order)" \
        "gp=$(count "$trace" --strategy global-prefix)" \
        "reads=$(count "$trace" --strategy reads --reads-from "$dir")"
    rm -rf "$dir/images" "$dir/reads/images"
done
