#!/bin/bash
# `zpool` for OpenZFS's test suite run against ZIL-PMEM (docs/design/zfs-slog.md, "OpenZFS's
# test suite"). Installed as /usr/local/sbin/zpool in the guest's test root: zfs-tests.sh
# links the first zpool it finds in /usr/local/sbin, /usr/local/bin, /usr/bin, /usr/sbin
# into the suite's PATH, so every `zpool` of the suite comes here, and everything but a
# successful `zpool create` is the real /usr/sbin/zpool unchanged.
#
# /etc/persim/zil-pmem (written by the runner before each test) says what a create gets:
#   absent     nothing: the stock ZIL
#   property   org.persim:zil=pmem on the new pool (ZIL-PMEM if its log vdev is one pmem
#              device; the suite's pools log to files, so the kernel says why it keeps the
#              stock ZIL)
#   pmem-log   the pool's log vdevs replaced by /dev/pmem0 (added if it has none; its first
#              8 MiB zeroed so that no earlier pool's log is found), then the property
# The property takes effect at a dataset's next mount, so a mounted new pool is remounted.
real=/usr/sbin/zpool
mode=$(cat /etc/persim/zil-pmem 2>/dev/null)
if [[ $1 != create || -z $mode ]]; then
    exec "$real" "$@"
fi
shift
opts=()
dry=0
while [[ $# -gt 0 && $1 == -* ]]; do
    case $1 in
    -o | -O | -m | -R | -t)
        opts+=("$1" "$2")
        shift
        ;;
    -*n*)
        dry=1
        opts+=("$1")
        ;;
    *) opts+=("$1") ;;
    esac
    shift
done
pool=$1
shift
vdevs=("$@")
if [[ $mode == pmem-log && $dry == 0 ]] && ! "$real" status -P 2>/dev/null | grep -q /dev/pmem0; then
    vdevs=()
    skip=0
    for a in "$@"; do
        case $a in
        log) skip=1 ;;
        special | dedup | cache | spare) skip=0 ;;
        esac
        [[ $skip == 1 ]] || vdevs+=("$a")
    done
    vdevs+=(log /dev/pmem0)
    opts+=(-f)
    dd if=/dev/zero of=/dev/pmem0 bs=1M count=8 conv=fsync status=none
    echo "zfs-tests-zpool: create $pool with log /dev/pmem0 instead of: ${*}" >/dev/kmsg
fi
"$real" create "${opts[@]}" "$pool" "${vdevs[@]}" || exit
[[ $dry == 1 ]] && exit 0
"$real" set org.persim:zil=pmem "$pool" || exit
if [[ $(zfs get -H -o value mounted "$pool" 2>/dev/null) == yes ]]; then
    zfs unmount "$pool" && zfs mount "$pool"
fi
