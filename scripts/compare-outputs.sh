#!/usr/bin/env bash
# Checks that a change left Persim's outputs as they were: runs hello-world (with the
# default strategy, program-order) and the ring buffer suite's tests (global-prefix) with
# the OLD build, judges each recorded trace again with the NEW build (`--trace-from`: its
# images and states made anew), and compares, byte for byte, images.json, report.json
# (without its wall-clock timings) and `persim images TRACE --json` of both builds on the
# same trace. (Two recordings can differ where the guest read a clock, e.g. ext4's journal
# commit times on a loaded host, so the trace is recorded once.) An OLD run directory left
# from an earlier call is resumed, not run again.
#   scripts/compare-outputs.sh OLD_PERSIM NEW_PERSIM [OUT_DIR]
# e.g. with the build of an older commit in a worktree:
#   git worktree add --detach /tmp/old REV && (cd /tmp/old && cargo build --release \
#     --workspace && cargo guest-tools)
#   scripts/compare-outputs.sh /tmp/old/target/release/persim target/release/persim
# Prints one line per test and file; exits 1 if anything differs.
set -euo pipefail
old=${1:?usage: $0 OLD_PERSIM NEW_PERSIM [OUT_DIR]}
new=${2:?usage: $0 OLD_PERSIM NEW_PERSIM [OUT_DIR]}
out=${3:-/tmp/persim-compare}
# test:strategy (global-prefix on hello-world makes thousands of images)
tests=(hello-world:program-order ringbuf/append:global-prefix ringbuf/append-clwb:global-prefix
    ringbuf/multi-line:global-prefix ringbuf/reuse:global-prefix)

# report.json without the fields that are wall-clock times
without_timings() {
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r.pop("timings", None); print(json.dumps(r, indent=1, sort_keys=True))' "$1"
}

differs=0
same() { # NAME FILE_A FILE_B
    if cmp -s "$2" "$3"; then
        echo "  $1: identical ($(wc -c <"$2") bytes)"
    else
        echo "  $1: DIFFERS ($2 vs $3)"
        differs=1
    fi
}

for spec in "${tests[@]}"; do
    test=${spec%:*} strategy=${spec#*:}
    name=${test//\//-}
    echo "$test ($strategy):"
    recorded=$out/old/$name
    # exit code 1 (violations) is a result; 2 (the tool failed) stops the comparison
    "$old" run --fs ext4 --test "$test" --strategy "$strategy" --reproducible \
        --out "$recorded" -q >/dev/null || [[ $? -eq 1 ]]
    rm -rf "$out/new/$name"
    mkdir -p "$out/new"
    "$new" run --fs ext4 --trace-from "$recorded" --strategy "$strategy" --out "$out/new/$name" \
        -q >/dev/null || [[ $? -eq 1 ]]
    for side in old new; do
        dir=$out/$side/$name
        persim=$old
        [[ $side == new ]] && persim=$new
        without_timings "$dir/report.json" >"$dir/report.untimed.json"
        "$persim" images "$recorded/trace.ptrace" --strategy "$strategy" --json -q \
            >"$dir/images-cli.json"
    done
    for file in images.json report.untimed.json images-cli.json; do
        same "$file" "$out/old/$name/$file" "$out/new/$name/$file"
    done
done
exit $differs
