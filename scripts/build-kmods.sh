#!/usr/bin/env bash
# Builds the kernel modules of targets/ (every directory under it with a Kbuild file: a
# module named by the Kbuild's obj-m, and its C files) against the headers of each guest
# kernel, into target/kmods/<release>/<name>.ko (docs/guides/kernel-fs.md).
# Usage: build-kmods.sh [RELEASE...]; without releases, for every guest kernel whose
# headers are here: the default one (the newest /boot/vmlinuz-*) and the unpacked ones
# under /var/lib/persim/kernels. `build-kmods.sh --default-release` prints the default
# release. The headers are /usr/src/linux-headers-<release> (Debian's
# linux-headers-<release>) or, for an unpacked kernel, its usr/src/linux-headers-<release>;
# scripts/setup.sh provides both. Kbuild uses the kernel's own flags; any compiler warning
# fails the build. Idempotent: make rebuilds what changed.
# DPWC_MUTANT=N builds only targets/dpwc/module, as mutant N (docs/design/dpwc.md), into
# target/kmods/<release>/dpwc-mutant-N/dm-dpwc.ko.
# `build-kmods.sh --zfs [RELEASE...]` builds OpenZFS's spl.ko and zfs.ko instead, from the
# source scripts/setup.sh unpacked from Debian's zfs-dkms into /var/lib/persim/zfs/src,
# cached in /var/lib/persim/zfs/<zfs version>/<release>/ and linked as
# target/kmods/<release>/zfs (docs/design/zfs-slog.md).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
readonly KERNELS_DIR=/var/lib/persim/kernels
readonly ZFS_DIR=/var/lib/persim/zfs
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

# The OpenZFS source setup.sh unpacked: /var/lib/persim/zfs/src/zfs-<version>.
zfs_source() {
    local src
    src=$(ls -1d "$ZFS_DIR"/src/zfs-* 2>/dev/null | sort -V | tail -n1)
    [[ -n $src && -x $src/configure ]] || die "no OpenZFS source in $ZFS_DIR/src: run scripts/setup.sh"
    echo "$src"
}

# Builds spl.ko and zfs.ko for release $1 unless they are cached, without debug
# information (the guest's initramfs holds them), and links the cache into target/kmods.
build_zfs() {
    local release=$1 src version headers cache build
    src=$(zfs_source)
    version=${src##*/zfs-}
    headers=$(headers_of "$release")
    cache=$ZFS_DIR/$version/$release
    if [[ ! -f $cache/zfs.ko || ! -f $cache/spl.ko ]]; then
        build=$cache.build
        rm -rf "$build"
        mkdir -p "$build"
        cp -a "$src"/. "$build"/
        echo "build-kmods.sh: building OpenZFS $version for $release in $build"
        # Debian splits a kernel's headers: the configured tree (-amd64) includes the
        # sources of its -common sibling.
        if ! (cd "$build" &&
            ./configure --with-config=kernel --with-linux="${headers%-amd64}-common" \
                --with-linux-obj="$headers" &&
            make -j"${ZFS_JOBS:-2}" -C module) >"$build.log" 2>&1; then
            tail -n 40 "$build.log" >&2
            die "building OpenZFS $version (zfs-dkms $(dpkg-query -W -f '${Version}' zfsutils-linux 2>/dev/null || echo '?')) for kernel $release failed; log: $build.log"
        fi
        mkdir -p "$cache.tmp"
        strip --strip-debug -o "$cache.tmp/spl.ko" "$build/module/spl.ko"
        strip --strip-debug -o "$cache.tmp/zfs.ko" "$build/module/zfs.ko"
        rm -rf "$cache" "$build"
        mv "$cache.tmp" "$cache"
    fi
    mkdir -p "$target/kmods/$release"
    ln -sfn "$cache" "$target/kmods/$release/zfs"
    echo "build-kmods.sh: $target/kmods/$release/zfs -> $cache (OpenZFS $version)"
}

main() {
    if [[ ${1:-} == --default-release ]]; then
        default_release
        return
    fi
    if [[ ${1:-} == --zfs ]]; then
        shift
        local releases=("$@") release
        ((${#releases[@]})) || mapfile -t releases < <(releases_with_headers)
        for release in "${releases[@]}"; do
            build_zfs "$release"
        done
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
