#!/usr/bin/env bash
# Builds the PmemConjurer checker plugin (PmemConjurer.cpp) against Debian's clang 16
# into target/conjurer/pmem-conjurer.so, beside the workspace's other build outputs.
# Needs clang-16, libclang-16-dev and llvm-16-dev (scripts/setup.sh installs them).
# Idempotent: a plugin newer than its source is left alone. docs/design/conjurer.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
llvm=${LLVM_DIR:-/usr/lib/llvm-16}
out=$root/target/conjurer
so=$out/pmem-conjurer.so

die() {
    echo "conjurer/build.sh: error: $*" >&2
    exit 1
}

[[ -x $llvm/bin/clang && -f $llvm/include/clang/StaticAnalyzer/Core/Checker.h ]] ||
    die "no clang 16 with its headers in $llvm: apt-get install clang-16 libclang-16-dev llvm-16-dev"
if [[ $so -nt $here/PmemConjurer.cpp && $so -nt $here/build.sh ]]; then
    echo "conjurer: up to date"
    exit 0
fi
mkdir -p "$out"
# The plugin resolves clang's symbols from the clang process that loads it.
"$llvm/bin/clang++" $("$llvm/bin/llvm-config" --cxxflags) -fPIC -shared -O2 -Wall -Wextra \
    -Werror -Wno-unused-parameter -o "$so.tmp" "$here/PmemConjurer.cpp"
mv "$so.tmp" "$so"
echo "conjurer: built $so"
