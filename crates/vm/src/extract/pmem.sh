#!/bin/busybox sh
# Attaches the NVDIMM as /dev/pmem0 in fsdax mode, and detaches it again.
#   persim-pmem fsdax    give a raw namespace a pfn device (at boot, and after attach)
#   persim-pmem detach   unmount /mnt and everything on /dev/pmem0, export ZFS pools,
#                        remove device-mapper devices, drop the NVMe disk's cached blocks and unbind region0: the
#                        namespace, the pfn device and pmem0 with its page cache are destroyed
#   persim-pmem attach   bind region0 again: the kernel probes the namespace as at boot
#                        (finding the pfn info block of the PM contents), then fsdax
region=/sys/bus/nd/devices/region0

# A label-less NVDIMM shows up as a raw namespace, which cannot do DAX. Give it a pfn
# device (fsdax mode, `ram`: struct pages in RAM): the kernel writes an info block into the
# namespace, and finds it again when a PM image that has it is attached.
fsdax() {
    ns=/sys/bus/nd/devices/namespace0.0
    [ -d "$ns" ] || return 0
    [ "$(cat /sys/block/pmem0/queue/dax 2>/dev/null)" = 1 ] && return 0
    pfn=$(cat $region/pfn_seed)
    echo namespace0.0 >/sys/bus/nd/drivers/nd_pmem/unbind
    # A fixed UUID: it is written into the info block, and so into every trace's initial image.
    echo 50455253-494d-4000-8000-0000000000fd >"/sys/bus/nd/devices/$pfn/uuid"
    echo ram >"/sys/bus/nd/devices/$pfn/mode"
    echo namespace0.0 >"/sys/bus/nd/devices/$pfn/namespace"
    echo "$pfn" >/sys/bus/nd/drivers/nd_pmem/bind
    [ "$(cat /sys/block/pmem0/queue/dax 2>/dev/null)" = 1 ]
}

detach() {
    # Whatever is mounted on /mnt first (it may be on the NVMe disk with its journal on
    # pmem0, or on a device-mapper device over both), then what remains on pmem0.
    for m in $(awk '$2 == "/mnt" || $1 == "/dev/pmem0" { print $2 }' /proc/mounts); do
        umount "$m" || return 1
    done
    # An imported ZFS pool holds its disk partition and its log on pmem0 open, so that the
    # next image's partition table cannot be read again.
    if command -v zpool >/dev/null; then zpool export -a || return 1; fi
    # Device-mapper devices (dm-writecache) hold pmem0 and the disk open.
    if command -v dmsetup >/dev/null; then dmsetup remove_all || return 1; fi
    # The next image's disk contents are read from the device, not from this one's cache.
    if [ -e /dev/nvme0n1 ]; then blockdev --flushbufs /dev/nvme0n1 || return 1; fi
    echo region0 >/sys/bus/nd/drivers/nd_region/unbind
}

attach() {
    echo region0 >/sys/bus/nd/drivers/nd_region/bind || return 1
    # Namespaces are registered asynchronously; this waits for their probes.
    cat /sys/bus/nd/devices/ndbus0/wait_probe >/dev/null
    # Reported as at boot (init.sh); the runner stops with an error naming the cause.
    fsdax || {
        echo "@@PERSIM-FSDAX-FAILED"
        return 1
    }
}

case "$1" in
fsdax | detach | attach) "$1" ;;
*)
    echo "usage: persim-pmem fsdax|detach|attach" >&2
    exit 2
    ;;
esac
