#!/usr/bin/env bash
# `persim conjure` on each C file of Debian's libpmemobj examples (the 1.12.1 sources
# libpmemobj-dev installs) and on the variants targets/pmdk-examples/build.sh makes: one
# line per file, "FILE FINDINGS SECONDS CPU-SECONDS RULE:LINE...", or "FILE skipped: WHY" for
# a file clang cannot compile here. The CPU time (clang's, user and system) is the figure
# a loaded host does not inflate. docs/design/conjurer.md has the results.
# Usage: conjurer/measure-examples.sh [PERSIM]   (default: target/release/persim)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
persim=${1:-$root/target/release/persim}
examples=${PMDK_EXAMPLES:-/usr/share/doc/libpmemobj-dev/examples}
variants=$root/target/pmdk-examples
plugin=$root/target/conjurer/pmem-conjurer.so

timing=$(mktemp)
trap 'rm -f "$timing"' EXIT

one() {
    local file=$1 src=$2 json TIMEFORMAT='%U %S'
    local flags=(-std=gnu99 -I "$root/targets/pmdk-examples/include" -I "$src" -I "$src/map"
        -I "$src/tree_map" -I "$src/hashmap" -I "$src/list_map")
    if ! { time json=$("$persim" conjure --json --plugin "$plugin" "$file" -- "${flags[@]}" 2>&1); } 2>"$timing"; then
        [[ $json == '{'* ]] || {
            echo "${file#"$src"/} skipped: $(grep -v '^persim: error' <<<"$json" | grep -m1 -o 'error: .*')"
            return
        }
    fi
    jq -r --arg f "${file#"$src"/}" --arg cpu "$(awk '{ printf "%.2f", $1 + $2 }' "$timing")" \
        '.files[0] | "\($f) \(.findings | length) \(.seconds * 100 | round / 100) \($cpu) \([.findings[] | "\(.rule):\(.line)"] | join(" "))"' \
        <<<"$json"
}

echo "== shipped ($examples)"
while read -r file; do
    one "$file" "$examples"
done < <(find "$examples" -name '*.c' | sort)
for patch in "$root"/targets/pmdk-examples/patches/*.patch; do
    variant=$(basename "$patch" .patch)
    echo "== $variant"
    for file in $(grep -o '^+++ b/[^[:space:]]*' "$patch" | sed 's|^+++ b/||' | sort -u); do
        one "$variants/$variant/src/$file" "$variants/$variant/src"
    done
done
