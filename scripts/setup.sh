#!/usr/bin/env bash
# Installs everything Persim needs on a Debian bookworm machine and builds the workspace.
# Idempotent: running it again changes nothing that is already in place.
set -euo pipefail

readonly BACKPORTS_SOURCES=/etc/apt/sources.list.d/persim-bookworm-backports.sources
readonly QEMU_MIN_MAJOR=10
# A second guest kernel, unpacked (not installed: the newest installed kernel stays the
# default one) for vm/ext4-dax-6.12.toml: $KERNELS_DIR/$EXTRA_KERNEL_SERIES/{vmlinuz,modules,System.map}.
readonly KERNELS_DIR=/var/lib/persim/kernels
readonly EXTRA_KERNEL_SERIES=6.12
# OpenZFS's module source and its builds per kernel (docs/design/zfs-slog.md).
readonly ZFS_DIR=/var/lib/persim/zfs

die() {
    echo "setup.sh: error: $*" >&2
    exit 1
}

check_prerequisites() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (try: sudo $0)"
    command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian bookworm only"
    command -v apt-cache >/dev/null || die "apt-cache not found: this script supports Debian bookworm only"
}

# Prints the URIs of the first deb822 stanza (in /etc/apt/sources.list.d/*.sources) whose
# Suites include plain `bookworm`, so that backports come from the machine's own mirror.
bookworm_mirror_uri() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -e $f && $f != "$BACKPORTS_SOURCES" ]] || continue
        awk '
            BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; suites = ""; types = ""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)   { uris = $i;   sub(/^URIs:[ \t]*/, "", uris) }
                    if ($i ~ /^Suites:/) { suites = " " $i " " }
                    if ($i ~ /^Types:/)  { types = $i }
                }
                if (types ~ /(^|[ \t])deb([ \t]|$)/ && suites ~ /[ \t]bookworm[ \t]/ && uris != "") {
                    split(uris, u, /[ \t]+/); print u[1]; exit
                }
            }' "$f"
    done | head -n1
}

bookworm_mirror_uri_from_list() {
    local files=()
    [[ -e /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list; do [[ -e $f ]] && files+=("$f"); done
    ((${#files[@]})) || return 0
    awk '$1 == "deb" && $0 ~ /[ \t]bookworm[ \t]/ {
            for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit }
        }' "${files[@]}" | head -n1
}

add_backports_source() {
    local uri
    uri=$(bookworm_mirror_uri)
    [[ -n $uri ]] || uri=$(bookworm_mirror_uri_from_list)
    [[ -n $uri ]] || die "no apt source for suite 'bookworm' found; cannot derive a mirror for bookworm-backports"
    local want
    want=$(printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main contrib\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri")
    if [[ -f $BACKPORTS_SOURCES && $(cat "$BACKPORTS_SOURCES") == "$want" ]]; then
        echo "setup.sh: bookworm-backports source already present ($uri)"
    else
        echo "setup.sh: adding bookworm-backports from $uri"
        printf '%s\n' "$want" >"$BACKPORTS_SOURCES"
    fi
}

apt_update() {
    apt-get update -q
}

# Backports is not pinned: apt only takes packages from it when asked with -t.
check_qemu_candidate() {
    local candidate
    candidate=$(apt-cache policy -t bookworm-backports qemu-system-x86 | awk '/Candidate:/ { print $2 }')
    echo "setup.sh: qemu-system-x86 candidate from bookworm-backports: ${candidate:-none}"
    local major=${candidate#*:}
    major=${major%%.*}
    [[ $major =~ ^[0-9]+$ && $major -ge $QEMU_MIN_MAJOR ]] ||
        die "qemu-system-x86 >= $QEMU_MIN_MAJOR is not available from bookworm-backports (candidate: ${candidate:-none})"
}

install_packages() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports \
        qemu-system-x86
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        linux-image-amd64 busybox-static e2fsprogs xfsprogs \
        build-essential dwarves pkg-config libglib2.0-dev libc6-dev libpmem-dev libpmemobj-dev \
        fio
    # PmemConjurer's checker plugin is built against clang 16's own headers and libraries
    # (conjurer/build.sh; docs/design/conjurer.md).
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang-16 libclang-16-dev llvm-16-dev
    # The headers the rest of PMDK's examples include, for conjurer/measure-examples.sh.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q libpmemlog-dev libpmemblk-dev \
        libuv1-dev libfuse-dev
    # OpenZFS's tools for vm/zfs-slog.toml (docs/design/zfs-slog.md), from contrib. Not its recommended
    # zfs-dkms: that would build and install the modules for the host's kernels.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports \
        --no-install-recommends zfsutils-linux
    # What OpenZFS's test suite (zfs-test, unpacked below) runs in the guest's chroot
    # (docs/design/zfs-slog.md, "OpenZFS's test suite"); not mdadm, which only RAID tests use.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        ksh acl attr bc fio lsscsi parted sudo sysstat xxhash wamerican udev python3 rsync pax
    # The browser that renders `persim report --html`'s pages in the tests
    # (crates/cli/tests/html_report.rs), and Slurm with munge for the cluster tests
    # (docs/guides/campaigns.md).
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        chromium slurm-wlm munge
}

# Downloads the current linux-image-6.12.*-amd64 (the package the meta-package
# linux-image-6.12-amd64 depends on, from bookworm-backports or bookworm-security), unpacks
# it into $KERNELS_DIR/<package>/, generates its modules.dep, adds release-independent
# names (vmlinuz, modules, System.map), points $KERNELS_DIR/6.12 at it and removes the
# packages it supersedes.
unpack_extra_kernel() {
    local meta=linux-image-$EXTRA_KERNEL_SERIES-amd64 pkg
    pkg=$(apt-cache depends -t bookworm-backports "$meta" |
        awk -v series="linux-image-$EXTRA_KERNEL_SERIES." '$1 == "Depends:" && index($2, series) == 1 { print $2; exit }')
    [[ -n $pkg ]] || die "cannot find the kernel package $meta depends on"
    local dir=$KERNELS_DIR/$pkg
    if [[ -f $dir/modules/modules.dep && -e $dir/vmlinuz && -e $dir/System.map ]]; then
        echo "setup.sh: kernel $pkg already unpacked in $dir"
    else
        echo "setup.sh: unpacking $pkg into $dir"
        local tmp
        tmp=$(mktemp -d)
        chown _apt "$tmp" 2>/dev/null || true # apt downloads as _apt when it can
        (cd "$tmp" && apt-get download -q -t bookworm-backports "$pkg")
        rm -rf "$dir.tmp"
        mkdir -p "$dir.tmp"
        dpkg-deb -x "$tmp"/"$pkg"_*.deb "$dir.tmp"
        rm -rf "$tmp"
        local image release
        image=$(cd "$dir.tmp/boot" && echo vmlinuz-*)
        release=${image#vmlinuz-}
        [[ -f $dir.tmp/boot/$image && -d $dir.tmp/lib/modules/$release ]] ||
            die "$pkg has no boot/vmlinuz-<release> with lib/modules/<release>"
        depmod -b "$dir.tmp" "$release"
        ln -sfn "boot/vmlinuz-$release" "$dir.tmp/vmlinuz"
        ln -sfn "boot/System.map-$release" "$dir.tmp/System.map"
        ln -sfn "lib/modules/$release" "$dir.tmp/modules"
        rm -rf "$dir"
        mv "$dir.tmp" "$dir"
    fi
    ln -sfn "$pkg" "$KERNELS_DIR/$EXTRA_KERNEL_SERIES"
    echo "setup.sh: $KERNELS_DIR/$EXTRA_KERNEL_SERIES -> $pkg"
    local old
    for old in "$KERNELS_DIR/linux-image-$EXTRA_KERNEL_SERIES."*; do
        [[ -d $old && $old != "$dir" ]] || continue
        echo "setup.sh: removing the superseded $old"
        rm -rf "$old"
    done
}

# The headers of the unpacked 6.12 kernel, for building Persim's kernel modules for it
# (docs/guides/kernel-fs.md): linux-headers-<release> cannot be installed without installing the
# kernel image it depends on (which would become the default guest kernel), so the
# headers, their -common part and the matching linux-kbuild are unpacked beside the
# kernel, into $KERNELS_DIR/6.12/usr/, and the headers' Makefile pointed at the unpacked
# -common tree. pahole (dwarves) makes the modules' BTF, as this kernel's build does.
unpack_extra_kernel_headers() {
    local dir release
    dir=$(readlink -f "$KERNELS_DIR/$EXTRA_KERNEL_SERIES")
    release=$(basename "$(readlink -f "$dir/modules")")
    local headers=$dir/usr/src/linux-headers-$release
    if [[ -f $headers/Makefile && -d $dir/usr/src/linux-headers-${release%-amd64}-common ]]; then
        echo "setup.sh: headers of $release already unpacked in $headers"
        return
    fi
    local kbuild=linux-kbuild-${release%-amd64} tmp
    tmp=$(mktemp -d)
    chown _apt "$tmp" 2>/dev/null || true
    (cd "$tmp" && apt-get download -q "linux-headers-$release" \
        "linux-headers-${release%-amd64}-common" "$kbuild")
    local deb
    for deb in "$tmp"/*.deb; do
        dpkg-deb -x "$deb" "$dir"
    done
    rm -rf "$tmp"
    sed -i "s|^include /usr/src/|include $dir/usr/src/|" "$headers/Makefile"
    [[ -f $headers/Makefile ]] || die "no $headers/Makefile after unpacking the headers of $release"
    echo "setup.sh: headers of $release unpacked in $headers"
}

# The headers of the default guest kernel (the newest /boot/vmlinuz-*), for the kernel
# modules under targets/ (docs/guides/kernel-fs.md).
install_kernel_headers() {
    local release
    release=$(bash "$(dirname "$0")/build-kmods.sh" --default-release)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "linux-headers-$release"
}

# OpenZFS's module source, of the tools' version, from zfs-dkms: downloaded and unpacked
# into $ZFS_DIR/src/zfs-<version> (not installed, so dkms builds nothing for the host).
unpack_zfs_source() {
    local version
    version=$(dpkg-query -W -f '${Version}' zfsutils-linux)
    local upstream=${version%%-*}
    local src=$ZFS_DIR/src/zfs-$upstream
    if [[ -x $src/configure ]]; then
        echo "setup.sh: OpenZFS $upstream source already in $src"
        return
    fi
    local tmp
    tmp=$(mktemp -d)
    chown _apt "$tmp" 2>/dev/null || true
    (cd "$tmp" && apt-get download -q "zfs-dkms=$version")
    dpkg-deb -x "$tmp"/zfs-dkms_*.deb "$tmp/x"
    [[ -x $tmp/x/usr/src/zfs-$upstream/configure ]] || die "zfs-dkms $version has no usr/src/zfs-$upstream/configure"
    mkdir -p "$ZFS_DIR/src"
    rm -rf "$src"
    mv "$tmp/x/usr/src/zfs-$upstream" "$src"
    rm -rf "$tmp"
    echo "setup.sh: OpenZFS $upstream source unpacked in $src"
}

# OpenZFS's test suite of the tools' version, from zfs-test: downloaded and unpacked into
# $ZFS_DIR/tests/zfs-test-<version> (not installed), then the guest's root for it built from
# that and the host's packages into $ZFS_DIR/tests/root.tar (scripts/zfs-tests-root.sh).
unpack_zfs_tests() {
    local version upstream dir tar here key
    version=$(dpkg-query -W -f '${Version}' zfsutils-linux)
    upstream=${version%%-*}
    here=$(dirname "$0")
    # Keyed by the scripts that make the root, so a fresh clone reuses it.
    key=$(cat "$here/zfs-tests-root.sh" "$here/zfs-tests-zpool.sh" | sha256sum | cut -c1-16)
    dir=$ZFS_DIR/tests/zfs-test-$upstream
    tar=$ZFS_DIR/tests/root-$upstream-$key.tar
    if [[ ! -x $dir/usr/share/zfs/zfs-tests.sh ]]; then
        local tmp
        tmp=$(mktemp -d)
        chown _apt "$tmp" 2>/dev/null || true
        (cd "$tmp" && apt-get download -q "zfs-test=$version")
        dpkg-deb -x "$tmp"/zfs-test_*.deb "$tmp/x"
        mkdir -p "$ZFS_DIR/tests"
        rm -rf "$dir"
        mv "$tmp/x" "$dir"
        rm -rf "$tmp" "$ZFS_DIR"/tests/root-"$upstream"-*.tar
    fi
    if [[ ! -f $tar ]]; then
        rm -f "$ZFS_DIR"/tests/root-"$upstream"-*.tar
        bash "$here/zfs-tests-root.sh" "$dir" "$tar"
    fi
    ln -sfn "${tar##*/}" "$ZFS_DIR/tests/root.tar"
    echo "setup.sh: OpenZFS $upstream test suite in $dir, its guest root $tar"
}

# DPWC's deliberately broken modules (docs/design/dpwc.md, "Mutants"), which
# crates/cli/tests/dpwc_mutants.rs runs; make rebuilds only what changed.
build_dpwc_mutants() {
    local n
    for n in 1 2 3 4 5 6 7 8 9 10; do
        DPWC_MUTANT=$n bash "$(dirname "$0")/build-kmods.sh"
    done
}

check_installed() {
    local version
    version=$(qemu-system-x86_64 --version | awk 'NR == 1 { print $4 }')
    [[ ${version%%.*} -ge $QEMU_MIN_MAJOR ]] || die "qemu-system-x86_64 is $version, need >= $QEMU_MIN_MAJOR"
    compgen -G '/boot/vmlinuz-*' >/dev/null || die "no kernel in /boot after installing linux-image-amd64"
    echo "setup.sh: QEMU $version, kernel(s): $(cd /boot && echo vmlinuz-*)"
}

# What a new user sees first: one file-system test end to end. Exit code 1 (violations
# found) is a result, not a setup failure.
run_main_job() {
    local persim out
    persim=/usr/local/bin/persim
    out=${PERSIM_DEMO_DIR:-/tmp/persim-demo}/hello-world
    echo "setup.sh: main job: persim run --fs ext4 --test hello-world --out $out"
    "$persim" run --fs ext4 --test hello-world --out "$out" || [[ $? -eq 1 ]]
}

build_workspace() {
    command -v cargo >/dev/null || die "cargo not found: install a Rust toolchain (rustup) first"
    (cd "$(dirname "$0")/.." && cargo build --release --workspace)
}

# The guest tools run in the initramfs, which has no C library: `cargo guest-tools`
# (.cargo/config.toml) links them statically, with frame pointers for
# `persim trace --stack-traces`.
build_guest_tools() {
    (cd "$(dirname "$0")/.." && cargo guest-tools)
}

usage() {
    echo "usage: $0 [--no-main-job]"
    echo "Installs QEMU 10, the guest kernel and tools (Debian packages), unpacks Debian's 6.12"
    echo "kernel into $KERNELS_DIR (for vm/ext4-dax-6.12.toml), builds Persim, and"
    echo "runs the main job (the hello-world file-system test on ext4-DAX, end to end)."
    echo "  --no-main-job   install and build only (what scripts/test.sh uses)"
}

# The worked example of testing your own program (suites/README.md): a libpmem program;
# a libpmemobj transaction program, the subject of `--strategy reads` (docs/results/results.md);
# a libpmem program that declares run-time data with include/persim.h; small libpmemobj
# programs with and without the bugs `persim analyze`'s PMDK rules find.
build_examples() {
    local root
    root="$(dirname "$0")/.."
    mkdir -p "$root/target/examples"
    # -g: reports name the program's stores and flushes by file:line.
    cc -O2 -g -Wall -Werror -I "$root/include" -o "$root/target/examples/transfer" \
        "$root/examples/own-program/transfer.c" -lpmem
    cc -O2 -Wall -Werror -o "$root/target/examples/accounts-tx" \
        "$root/examples/pmdk-tx/accounts-tx.c" -lpmemobj
    cc -O2 -Wall -Werror -o "$root/target/examples/pmdk-rules" \
        "$root/examples/pmdk-rules/rules.c" -lpmemobj -pthread
    cc -O2 -Wall -Werror -I "$root/include" -o "$root/target/examples/tally" \
        "$root/examples/runtime-data/tally.c" -lpmem
    # PMDK's own examples, shipped and with PmemSanitizer's bugs re-created
    # (docs/design/pmdk-examples.md), from the sources libpmemobj-dev installs.
    bash "$root/targets/pmdk-examples/build.sh"
    # Pangolin's ports of the same maps, against its C ABI (docs/design/pangolin.md).
    bash "$root/targets/pangolin/maps/build.sh"
    # The static checker of the PM programming rules that `persim conjure` runs.
    bash "$root/conjurer/build.sh"
}

main() {
    local main_job=1
    case ${1:-} in
        "") ;;
        --no-main-job) main_job=0 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    check_prerequisites
    apt_update
    add_backports_source
    apt_update
    check_qemu_candidate
    install_packages
    unpack_extra_kernel
    check_installed
    install_kernel_headers
    unpack_extra_kernel_headers
    build_workspace
    build_guest_tools
    build_examples
    bash "$(dirname "$0")/build-kmods.sh"
    build_dpwc_mutants
    unpack_zfs_source
    unpack_zfs_tests
    if [[ ${PERSIM_ZFS:-0} == 1 ]]; then
        bash "$(dirname "$0")/build-kmods.sh" --zfs
    else
        # Link what an earlier PERSIM_ZFS=1 setup built, so its tests run; build nothing.
        ZFS_CACHED_ONLY=1 bash "$(dirname "$0")/build-kmods.sh" --zfs
        ZFS_CACHED_ONLY=1 bash "$(dirname "$0")/build-kmods.sh" --zfs-pmem
        ZFS_CACHED_ONLY=1 bash "$(dirname "$0")/build-kmods.sh" --zfs-pmem-mutants
    fi
    bash "$(dirname "$0")/install.sh" /usr/local
    if ((main_job)); then run_main_job; fi
}

main "$@"
