#!/usr/bin/env bash
# Builds PMDK's libpmemobj examples from Debian's libpmemobj-dev (its sources in
# /usr/share/doc/libpmemobj-dev/examples, never copied into this repository) into
# target/pmdk-examples/: for each variant, a copy of the sources with the variant's patch
# (patches/<variant>.patch; none for `shipped`) and its programs, pmdk-map-<variant> (the
# map examples driven by pmdk-map.c) and pi-<variant>. docs/design/pmdk-examples.md.
# Idempotent: a variant whose programs are newer than its inputs is left alone.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
examples=${PMDK_EXAMPLES:-/usr/share/doc/libpmemobj-dev/examples}
out=$root/target/pmdk-examples

die() {
    echo "pmdk-examples/build.sh: error: $*" >&2
    exit 1
}

[[ -f $examples/map/mapcli.c ]] ||
    die "no PMDK examples in $examples: install libpmemobj-dev (scripts/setup.sh does)"

# The map sources pmdk-map links: the map layer and the five maps under test (ctree for
# the comparison with Pangolin's ports, targets/pangolin/maps).
map_sources=(map/map.c map/map_rtree.c map/map_btree.c map/map_ctree.c map/map_hashmap_tx.c
    map/map_hashmap_rp.c tree_map/rtree_map.c tree_map/btree_map.c tree_map/ctree_map.c
    hashmap/hashmap_tx.c hashmap/hashmap_rp.c)

build_variant() {
    local variant=$1 patch=${2:-}
    local src=$out/$variant/src bin=$out/bin
    local inputs=("$here/build.sh" "$here/pmdk-map.c" "$here/include/ex_common.h")
    [[ -n $patch ]] && inputs+=("$patch")
    local newest=1 f
    for f in "${inputs[@]}"; do
        [[ $bin/pmdk-map-$variant -nt $f && $bin/pi-$variant -nt $f ]] || newest=0
    done
    if ((newest)); then
        echo "pmdk-examples: $variant up to date"
        return
    fi
    rm -rf "$src"
    mkdir -p "$src" "$bin"
    cp -r "$examples/map" "$examples/tree_map" "$examples/hashmap" "$examples/pi.c" "$src/"
    [[ -n $patch ]] && patch -p1 --quiet --forward -d "$src" <"$patch"
    # PMDK's own sources are built as its Makefiles do (-std=gnu99, the map, tree_map
    # and hashmap directories on the include path); only pmdk-map.c is held to -Wextra.
    local cflags=(-O2 -g -std=gnu99 -Wall -I "$here/include" -I "$src/map" -I "$src/tree_map" -I "$src/hashmap")
    cc "${cflags[@]}" -Wextra -Werror -I "$root/include" -c -o "$src/pmdk-map.o" \
        "$here/pmdk-map.c"
    cc "${cflags[@]}" -o "$bin/pmdk-map-$variant" "$src/pmdk-map.o" \
        "${map_sources[@]/#/$src/}" -lpmemobj -pthread
    cc "${cflags[@]}" -o "$bin/pi-$variant" "$src/pi.c" \
        -lpmemobj -pthread -lm
    echo "pmdk-examples: built $variant"
}

build_variant shipped
for patch in "$here"/patches/*.patch; do
    build_variant "$(basename "$patch" .patch)" "$patch"
done
