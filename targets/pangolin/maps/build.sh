#!/usr/bin/env bash
# Builds the Pangolin ports of libpmemobj's map examples (btree, ctree, hashmap_tx; our
# own code against pangolin.h) into target/pangolin-maps/bin/pangolin-map, linked with
# libpangolin.a (targets/pangolin/capi, built here with cargo) and the C library, as
# targets/pmdk-examples/build.sh builds pmdk-map against libpmemobj. docs/design/pangolin.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$root/target/pangolin-maps
cargo_target=${CARGO_TARGET_DIR:-$root/target}

cargo build --release --quiet -p persim-pangolin-capi --manifest-path "$root/Cargo.toml"
mkdir -p "$out/bin"
cc -O2 -g -std=gnu11 -Wall -Wextra -Werror -I "$here" -I "$root/targets/pangolin/capi/include" \
    -I "$root/include" -o "$out/bin/pangolin-map" \
    "$here/pangolin-map.c" "$here/btree_map.c" "$here/ctree_map.c" "$here/hashmap_tx.c" \
    "$cargo_target/release/libpangolin.a" -lpthread -ldl -lm
echo "pangolin-maps: built $out/bin/pangolin-map"
