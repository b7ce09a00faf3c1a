#!/usr/bin/env bash
# Builds the kernel modules of targets/ (every directory under it with a Kbuild file: a
# module named by the Kbuild's obj-m, and its C files) against the headers of each guest
# kernel, into target/kmods/<release>/<name>.ko (docs/kmods.md).
# Usage: build-kmods.sh [RELEASE...]; without releases, for every guest kernel whose
# headers are here: the default one (the newest /boot/vmlinuz-*) and the unpacked ones
# under /var/lib/persim/kernels. `build-kmods.sh --default-release` prints the default
# release. The headers are /usr/src/linux-headers-<release> (Debian's
# linux-headers-<release>) or, for an unpacked kernel, its usr/src/linux-headers-<release>;
# scripts/setup.sh provides both. Kbuild uses the kernel's own flags; any compiler warning
# fails the build. Idempotent: make rebuilds what changed.
# DPWC_MUTANT=N builds only targets/dpwc/module, as mutant N (docs/dpwc.md), into
# target/kmods/<release>/dpwc-mutant-N/dm-dpwc.ko.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
readonly KERNELS_DIR=/var/lib/persim/kernels
mutant=${DPWC_MUTANT:-}

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

# The headers of release $1: installed, or beside an unpacked kernel.
headers_of() {
    local dir
    for dir in /usr/src/linux-headers-"$1" "$KERNELS_DIR"/*/usr/src/linux-headers-"$1"; do
        if [[ -f $dir/Makefile ]]; then
            echo "$dir"
            return
        fi
    done
    die "no headers for $1 in /usr/src or $KERNELS_DIR: run scripts/setup.sh"
}

# Every release with headers: the default kernel's and the unpacked kernels'.
releases_with_headers() {
    default_release
    local dir
    for dir in "$KERNELS_DIR"/*/usr/src/linux-headers-*; do
        [[ -f $dir/Makefile && $dir != *-common ]] || continue
        basename "$dir" | sed 's/^linux-headers-//'
    done | sort -u
}

# The module a Kbuild file builds: its obj-m.
module_name() {
    sed -n 's/^obj-m[[:space:]]*[:+]\?=[[:space:]]*\([^[:space:]]*\)\.o.*/\1/p' "$1/Kbuild" | head -n1
}

# Builds module directory $1 for release $2 in a copy under the output directory, so that
# the source tree gets no build products.
build_module() {
    local src=$1 release=$2 name headers out build log
    name=$(module_name "$src")
    [[ -n $name ]] || die "$src/Kbuild has no obj-m"
    headers=$(headers_of "$release")
    out=$target/kmods/$release${mutant:+/dpwc-mutant-$mutant}
    build=$out/build/$name
    mkdir -p "$build"
    # Only changed sources are copied, so make sees what is new.
    cp -u "$src"/* "$build"/
    log=$build/make.log
    if ! make -C "$headers" M="$build" ${mutant:+DPWC_MUTANT=$mutant} modules >"$log" 2>&1; then
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
    local releases=("$@") release kbuild
    ((${#releases[@]})) || mapfile -t releases < <(releases_with_headers)
    for release in "${releases[@]}"; do
        if [[ -n $mutant ]]; then
            build_module "$root/targets/dpwc/module" "$release"
            continue
        fi
        while IFS= read -r kbuild; do
            build_module "$(dirname "$kbuild")" "$release"
        done < <(find "$root/targets" -name Kbuild | sort)
    done
}

main "$@"
