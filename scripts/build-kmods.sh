#!/usr/bin/env bash
# Builds the kernel modules under targets/kmods/<name>/ (a Kbuild and its C files) against
# the headers of each guest kernel, into target/kmods/<release>/<name>.ko (docs/kmods.md).
# Usage: build-kmods.sh [RELEASE...]; without releases, the default guest kernel's (the
# newest /boot/vmlinuz-*). `build-kmods.sh --default-release` prints that release. The headers are /usr/src/linux-headers-<release> (Debian's
# linux-headers-<release>, which scripts/setup.sh installs). Kbuild uses the kernel's own
# flags; any compiler warning fails the build. Idempotent: make rebuilds what changed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}

die() {
    echo "build-kmods.sh: error: $*" >&2
    exit 1
}

# The release of the newest /boot/vmlinuz-*, as Persim picks the guest kernel.
default_release() {
    local newest
    newest=$(cd /boot && ls -1 vmlinuz-* 2>/dev/null | sed 's/^vmlinuz-//' | sort -V | tail -n1)
    [[ -n $newest ]] || die "no /boot/vmlinuz-*: install a kernel (scripts/setup.sh)"
    echo "$newest"
}

# Builds module directory $1 for release $2 in a copy under the output directory, so that
# the source tree gets no build products.
build_module() {
    local src=$1 release=$2 name headers out build log
    name=$(basename "$src")
    headers=/usr/src/linux-headers-$release
    [[ -f $headers/Makefile ]] ||
        die "no headers for $release in $headers: apt-get install linux-headers-$release"
    out=$target/kmods/$release
    build=$out/build/$name
    mkdir -p "$build"
    # Only changed sources are copied, so make sees what is new.
    cp -u "$src"/* "$build"/
    log=$build/make.log
    if ! make -C "$headers" M="$build" modules >"$log" 2>&1; then
        cat "$log" >&2
        die "building $name for $release failed"
    fi
    if grep -q 'warning:' "$log"; then
        cat "$log" >&2
        die "building $name for $release gave warnings"
    fi
    cp "$build/$name.ko" "$out/$name.ko"
    echo "build-kmods.sh: $out/$name.ko"
}

main() {
    if [[ ${1:-} == --default-release ]]; then
        default_release
        return
    fi
    local releases=("$@") release src
    ((${#releases[@]})) || releases=("$(default_release)")
    for release in "${releases[@]}"; do
        for src in "$root"/targets/kmods/*/; do
            build_module "${src%/}" "$release"
        done
    done
}

main "$@"
