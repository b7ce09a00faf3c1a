#!/usr/bin/env bash
# Builds the root file system in which the guest runs OpenZFS's own test suite
# (docs/design/zfs-slog.md, "OpenZFS's test suite"): a tar archive of the host's Debian
# files the suite needs, which the guest unpacks and enters with chroot.
#
#   bash scripts/zfs-tests-root.sh SUITE_DIR OUT.tar
#
# SUITE_DIR is Debian's zfs-test package unpacked by scripts/setup.sh
# (/var/lib/persim/zfs/tests/zfs-test-<version>). The archive holds: that package's
# /usr/share/zfs; every installed package providing a command the suite lists in its
# commands.cfg (plus the shells, sudo, su, udev and python3), with the installed packages
# they depend on (PAM's modules, python's library, alternatives); /usr/share/dict, which
# the replay tests copy; a user `ztest` with passwordless sudo (zfs-tests.sh refuses root);
# /usr/local/sbin/zpool, the wrapper that gives pools ZIL-PMEM (zfs-tests-zpool.sh); and
# /usr/local/bin/udevadm, which lets udev work in the chroot.
# Nothing is downloaded: a missing command is left out and the suite reports it missing.
set -euo pipefail

die() {
    echo "zfs-tests-root.sh: error: $*" >&2
    exit 2
}

[[ $# -eq 2 ]] || die "usage: $0 SUITE_DIR OUT.tar (SUITE_DIR: the unpacked zfs-test package)"
suite=$1
out=$2
cfg=$suite/usr/share/zfs/zfs-tests/include/commands.cfg
[[ -f $cfg ]] || die "$cfg not found: unpack Debian's zfs-test package there (scripts/setup.sh)"
here=$(cd "$(dirname "$0")" && pwd)

# The commands the suite links into its PATH, and those it runs outside it.
# shellcheck disable=SC1090
commands=$(. "$cfg" && echo "$SYSTEM_FILES_COMMON $SYSTEM_FILES_LINUX $ZFS_FILES")
commands="$commands bash dash sh su sudo chroot udevadm python3 which"

# The package owning each command found (dpkg knows /bin paths by their pre-/usr names).
owner() {
    local p=$1
    dpkg -S "$p" 2>/dev/null || dpkg -S "${p#/usr}" 2>/dev/null || true
}
packages=()
links=()
for c in $commands; do
    for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin; do
        [[ -e $d/$c ]] || continue
        real=$(readlink -f "$d/$c")
        pkg=$(owner "$real" | head -n1 | cut -d: -f1)
        [[ -n $pkg ]] && packages+=("$pkg")
        links+=("$d/$c")
        break
    done
done
packages+=(libpam-modules libpam-runtime wamerican udev base-files)
# With what they depend on (installed packages only; no recommends).
mapfile -t closure < <(apt-cache depends --recurse --installed --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances "${packages[@]}" 2>/dev/null |
    grep -v '^ ' | grep -v '^<' | sort -u)

list=$(mktemp /tmp/zfs-tests-root.XXXXXX)
stage=$(mktemp -d /tmp/zfs-tests-root.XXXXXX)
chmod 755 "$stage"
trap 'rm -rf "$list" "$stage"' EXIT
# Installed files of the closure, their directories canonical (merged /usr), without docs.
for pkg in "${closure[@]}"; do
    dpkg-query -W -f '${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed || continue
    dpkg -L "$pkg" 2>/dev/null
done | grep -Ev '^/usr/share/(doc|man|info|locale|lintian|bug)/' | while read -r f; do
    [[ -e $f || -L $f ]] || continue
    [[ -d $f && ! -L $f ]] && continue
    dir=$(readlink -f "$(dirname "$f")")
    echo "$dir/$(basename "$f")"
done >"$list"
# The commands' links made by maintainer scripts (update-alternatives: ksh, awk), each hop.
for l in "${links[@]}"; do
    while [[ -L $l ]]; do
        echo "$(readlink -f "$(dirname "$l")")/$(basename "$l")"
        t=$(readlink "$l")
        [[ $t == /* ]] || t=$(dirname "$l")/$t
        l=$t
    done
done >>"$list"
# Symlinks' targets, and the libraries any ELF file needs.
for _ in 1 2 3; do
    while read -r f; do
        [[ -L $f ]] && readlink -f "$f"
    done <"$list" >>"$list.more"
    sort -u "$list" "$list.more" -o "$list"
    rm -f "$list.more"
done
while read -r f; do
    [[ -f $f && -x $f ]] || continue
    ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }' || true
done <"$list" | sort -u | while read -r lib; do
    echo "$(readlink -f "$(dirname "$lib")")/$(basename "$lib")"
    readlink -f "$lib"
done >>"$list"
sort -u "$list" -o "$list"

# What the guest's chroot needs besides: merged-/usr links, users, sudo, the wrapper.
mkdir -p "$stage/etc/sudoers.d" "$stage/usr/local/sbin" "$stage/home/ztest" \
    "$stage/usr/share/zfs" "$stage"/{dev,proc,sys,tmp,run,var/tmp,root}
ln -s usr/bin "$stage/bin"
ln -s usr/sbin "$stage/sbin"
ln -s usr/lib "$stage/lib"
ln -s usr/lib64 "$stage/lib64"
cat >"$stage/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
ztest:x:1000:1000:zfs-tests:/home/ztest:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$stage/etc/group" <<'EOF'
root:x:0:
wheel:x:10:
staff:x:50:
ztest:x:1000:
nogroup:x:65534:
EOF
printf 'root:*:20000:0:99999:7:::\nztest:*:20000:0:99999:7:::\n' >"$stage/etc/shadow"
printf 'root:*::\nztest:*::\n' >"$stage/etc/gshadow"
chmod 640 "$stage/etc/shadow" "$stage/etc/gshadow"
echo 'ztest ALL=(ALL) NOPASSWD: ALL' >"$stage/etc/sudoers.d/ztest"
chmod 440 "$stage/etc/sudoers.d/ztest"
echo 'Defaults !fqdn, !syslog, !requiretty' >"$stage/etc/sudoers.d/guest"
chmod 440 "$stage/etc/sudoers.d/guest"
echo persim-zfs-tests >"$stage/etc/hostname"
printf '127.0.0.1 localhost persim-zfs-tests\n' >"$stage/etc/hosts"
# PAM's common-* files and nsswitch.conf are written by maintainer scripts, not listed by dpkg.
cp -a /etc/pam.d "$stage/etc/"
cp /etc/nsswitch.conf "$stage/etc/"
chown -R 1000:1000 "$stage/home/ztest"
chmod 1777 "$stage/tmp" "$stage/var/tmp"
install -m 755 "$here/zfs-tests-zpool.sh" "$stage/usr/local/sbin/zpool"
# udevadm refuses to trigger or settle in a chroot unless told not to mind it; the suite
# waits for zvols' /dev/zvol links with `udevadm settle` (first in its PATH from here).
mkdir -p "$stage/usr/local/bin"
printf '#!/bin/sh\nSYSTEMD_IGNORE_CHROOT=1 exec /usr/bin/udevadm "$@"\n' >"$stage/usr/local/bin/udevadm"
chmod 755 "$stage/usr/local/bin/udevadm"
cp -a "$suite/usr/share/zfs/." "$stage/usr/share/zfs/"

tmp=$out.tmp
rm -f "$tmp"
tar -C "$stage" -cf "$tmp" .
# The host's files (minus what the stage replaces), their leading / removed by tar.
grep -Ev '^/etc/(passwd|group|shadow|gshadow|hostname|hosts|nsswitch.conf)$|^/etc/pam.d/|^/usr/share/zfs/' "$list" |
    tar -rf "$tmp" --no-recursion -T - 2>/dev/null
mv "$tmp" "$out"
echo "zfs-tests-root.sh: $out: $(du -h "$out" | cut -f1), $(wc -l <"$list") host files from ${#closure[@]} packages"
