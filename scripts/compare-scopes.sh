#!/usr/bin/env bash
# Judges every test of the fs suite with global-prefix under `--scope program` and under
# `--scope all`, from one program-order trace, back to back (docs/results/performance.md,
# "Pruning what a mechanism protects"). `all` never completes uncapped, so it runs at
# --max-images 32 for its time per image, and `persim images` counts its uncapped images and
# the distinct ones in its 4,096-per-point sample (a lower bound).
#   scripts/compare-scopes.sh OUT_DIR VM_ARGS...   e.g. scripts/compare-scopes.sh /tmp/s --fs xfs
# TESTS="atime touch" limits the suite. Prints one line per test:
#   test program=IMAGES/SECONDS all=COUNTED/DISTINCT/SECONDS_PER_IMAGE all_at_least=SECONDS states=same|DIFFER
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 2 ]]; then
    echo "usage: $0 OUT_DIR VM_ARGS... (e.g. --fs ext4, or --vm vm/ext4-pmjournal.toml)" >&2
    exit 2
fi
out=$1
shift
persim=$PWD/target/release/persim
tests=${TESTS:-$(basename -s .toml suites/fs/*.toml)}
mkdir -p "$out"

# run DIR ARGS...: a persim run whose violations (exit 1) are a result; prints its seconds
run() {
    local dir=$1 start
    shift
    rm -rf "$dir"
    start=$(date +%s.%N)
    "$persim" run "$@" -j 2 --out "$dir" -q >"$dir.log" 2>&1 || [[ $? -eq 1 ]]
    printf '%.1f\n' "$(echo "$(date +%s.%N) - $start" | bc)"
}
# judged DIR: images judged and total judging seconds of a run
judged() {
    python3 - "$1" <<'EOF'
import json, re, sys
d = sys.argv[1]
total = re.search(r"timings: .*total ([\d.]+) s", open(d + ".log").read())
print(len(json.load(open(d + "/images.json"))["images"]), total[1] if total else 0)
EOF
}

for test in $tests; do
    po=$out/$test-program-order
    run "$po" "$@" --test "$test" --strategy program-order >/dev/null
    program_s=$(run "$out/$test-program" "$@" --trace-from "$po" --strategy global-prefix --scope program)
    run "$out/$test-all" "$@" --trace-from "$po" --strategy global-prefix --scope all --max-images 32 >/dev/null
    read -r program_images _ <<<"$(judged "$out/$test-program")"
    read -r all_images all_s <<<"$(judged "$out/$test-all")"
    read -r counted distinct <<<"$("$persim" images "$po/trace.ptrace" --strategy global-prefix \
        --scope all --from-checkpoint 1 --json -q | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(sum(p["space"] for p in d["failure_points"]), len(d["images"]))')"
    states=same
    "$persim" report "$out/$test-program" --compare "$out/$test-all" >"$out/$test-compare.txt" ||
        states=DIFFER
    per_image=$(echo "scale=3; $all_s / $all_images" | bc)
    echo "$test program=$program_images/$program_s all=$counted/$distinct/$per_image" \
        "all_at_least=$(printf '%.0f' "$(echo "$distinct * $per_image" | bc)") states=$states"
    rm -rf "$out/$test-all/images" "$out/$test-program/images" "$po/images"
done
