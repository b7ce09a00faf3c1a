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
# `build-kmods.sh --zfs-pmem [RELEASE...]` builds them with ZIL-PMEM's patch series
# (targets/zil-pmem/openzfs/*.patch, docs/design/zil-pmem.md) applied, cached in
# /var/lib/persim/zfs/<zfs version>-pmem-<hash of the patches>/<release>/ and linked as
# target/kmods/<release>/zfs-pmem. Its build tree, <zfs version>/<release>.pmem-build,
# is configured once and kept: a changed series rebuilds only what it changes.
# `build-kmods.sh --zfs-pmem-mutants [RELEASE...]` builds them with the series and then
# targets/zil-pmem/openzfs/mutants/*.patch (the mutants the tests must catch, chosen by the
# module parameter zil_pmem_mutant), in the same build tree, cached in
# /var/lib/persim/zfs/<zfs version>-pmem-mutants-<hash of all the patches>/<release>/ and
# linked as target/kmods/<release>/zfs-pmem-mutants.
# ZFS_CACHED_ONLY=1 with --zfs or --zfs-pmem links the builds that are cached and builds
# nothing (what setup.sh does without PERSIM_ZFS=1, so cached modules are tested).
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

# With ZFS_CACHED_ONLY=1: says that build $1 is not cached, and succeeds (skip it).
not_cached() {
    [[ ${ZFS_CACHED_ONLY:-0} == 1 ]] || return 1
    echo "build-kmods.sh: $1 is not built (no cache); its tests will say SKIPPED"
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
        not_cached "OpenZFS $version for $release" && return
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

# The files patch series $@ creates or changes, one a line.
patched_files() {
    sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$@" | sort -u
}

# Makes build tree $1, configured for release $2 from source $3, hold the source with
# patches $4... applied. Only files whose contents change are written, so that make
# recompiles only what the series changes; the files the previous series touched (listed
# in the tree's .persim-patched) are first put back as the source has them.
patch_zfs_tree() {
    local build=$1 release=$2 src=$3 headers stage f
    shift 3
    headers=$(headers_of "$release")
    if [[ ! -x $build/config.status ]]; then
        rm -rf "$build"
        mkdir -p "$build"
        cp -a "$src"/. "$build"/
    fi
    stage=$(mktemp -d /tmp/build-kmods-zfs-pmem.XXXXXX)
    local files=()
    mapfile -t files < <({ cat "$build/.persim-patched" 2>/dev/null || true; patched_files "$@"; } | sort -u)
    for f in "${files[@]}"; do
        if [[ -f $src/$f ]]; then
            mkdir -p "$stage/$(dirname "$f")"
            cp "$src/$f" "$stage/$f"
        fi
    done
    for f in "$@"; do
        if ! patch -d "$stage" -p1 --quiet --no-backup-if-mismatch <"$f"; then
            rm -rf "$stage"
            die "patch $f does not apply to OpenZFS in $src: rebase it on that version"
        fi
    done
    local kbuild_changed=0
    for f in "${files[@]}"; do
        if [[ -f $stage/$f ]]; then
            cmp -s "$stage/$f" "$build/$f" && continue
            mkdir -p "$build/$(dirname "$f")"
            cp "$stage/$f" "$build/$f"
        else
            rm -f "$build/$f"
        fi
        [[ $f != module/Kbuild.in ]] || kbuild_changed=1
    done
    rm -rf "$stage"
    patched_files "$@" >"$build/.persim-patched"
    if [[ ! -x $build/config.status ]]; then
        (cd "$build" && ./configure --with-config=kernel --with-linux="${headers%-amd64}-common" \
            --with-linux-obj="$headers") >"$build.log" 2>&1 ||
            die "configuring OpenZFS for kernel $release failed; log: $build.log"
    elif ((kbuild_changed)); then
        (cd "$build" && ./config.status module/Kbuild) >>"$build.log" 2>&1
    fi
}

# Builds spl.ko and zfs.ko with ZIL-PMEM's patches for release $1 unless cached, and links
# the cache into target/kmods as zfs-pmem; with $2 = mutants, with the mutants' patches
# after them, as zfs-pmem-mutants.
build_zfs_pmem() {
    local release=$1 kind=pmem${2:+-$2} src version patches hash cache build
    src=$(zfs_source)
    version=${src##*/zfs-}
    patches=("$root"/targets/zil-pmem/openzfs/*.patch)
    [[ -f ${patches[0]} ]] || die "no patches in $root/targets/zil-pmem/openzfs"
    if [[ -n ${2:-} ]]; then
        patches+=("$root"/targets/zil-pmem/openzfs/"$2"/*.patch)
        [[ -f ${patches[-1]} ]] || die "no patches in $root/targets/zil-pmem/openzfs/$2"
    fi
    hash=$(cat "${patches[@]}" | sha256sum | cut -c1-16)
    cache=$ZFS_DIR/$version-$kind-$hash/$release
    build=$ZFS_DIR/$version/$release.pmem-build
    if [[ ! -f $cache/zfs.ko || ! -f $cache/spl.ko ]]; then
        not_cached "OpenZFS $version with ZIL-PMEM $hash for $release" && return
        mkdir -p "$ZFS_DIR/$version"
        # One build at a time in the shared tree.
        exec 9>"$build.lock"
        flock 9
        echo "build-kmods.sh: building OpenZFS $version with ${#patches[@]} ZIL-PMEM patches for $release in $build"
        patch_zfs_tree "$build" "$release" "$src" "${patches[@]}"
        # This build's make output only: configure's checks print warnings of their own.
        local log=$build.make.log
        if ! make -j"${ZFS_JOBS:-2}" -C "$build/module" >"$log" 2>&1; then
            tail -n 40 "$log" >&2
            die "building OpenZFS $version with ZIL-PMEM for kernel $release failed; log: $log"
        fi
        if grep -q 'warning:' "$log"; then
            grep -B2 -A6 'warning:' "$log" >&2
            die "building OpenZFS $version with ZIL-PMEM gave warnings; log: $log"
        fi
        mkdir -p "$cache.tmp"
        strip --strip-debug -o "$cache.tmp/spl.ko" "$build/module/spl.ko"
        strip --strip-debug -o "$cache.tmp/zfs.ko" "$build/module/zfs.ko"
        rm -rf "$cache"
        mv "$cache.tmp" "$cache"
        exec 9>&-
    fi
    mkdir -p "$target/kmods/$release"
    ln -sfn "$cache" "$target/kmods/$release/zfs-$kind"
    echo "build-kmods.sh: $target/kmods/$release/zfs-$kind -> $cache (OpenZFS $version, ZIL-PMEM $hash)"
}

main() {
    if [[ ${1:-} == --default-release ]]; then
        default_release
        return
    fi
    if [[ ${1:-} == --zfs || ${1:-} == --zfs-pmem || ${1:-} == --zfs-pmem-mutants ]]; then
        local build=build_zfs kind=
        [[ $1 == --zfs ]] || build=build_zfs_pmem
        [[ $1 != --zfs-pmem-mutants ]] || kind=mutants
        shift
        local releases=("$@") release
        ((${#releases[@]})) || mapfile -t releases < <(releases_with_headers)
        for release in "${releases[@]}"; do
            "$build" "$release" ${kind:+"$kind"}
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
