#!/bin/busybox sh
# PID 1 of the Persim guest: loads the modules, then runs commands from the serial console.
# Protocol (runner -> guest): "@@RUN <id>", base64 lines of a shell script, ".".
# Guest -> runner: "@@PERSIM-BEGIN <id>", the script's output, "@@PERSIM-END <id> <exit code>".
/bin/busybox --install -s /bin
export PATH=/bin:/usr/sbin:/usr/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /mnt
for m in $(cat /etc/persim/modules); do
    insmod "/lib/persim-modules/$m" || echo "@@PERSIM-MODULE-FAILED $m"
done
# A label-less NVDIMM shows up as a raw namespace, which cannot do DAX. Give it a pfn
# device (fsdax mode, `ram`: struct pages in RAM): the kernel writes an info block into the
# namespace, and finds it again when a PM image that has it is booted.
fsdax() {
    ns=/sys/bus/nd/devices/namespace0.0
    [ -d "$ns" ] || return 0
    [ "$(cat /sys/block/pmem0/queue/dax 2>/dev/null)" = 1 ] && return 0
    pfn=$(cat /sys/bus/nd/devices/region0/pfn_seed)
    echo namespace0.0 >/sys/bus/nd/drivers/nd_pmem/unbind
    cat /proc/sys/kernel/random/uuid >"/sys/bus/nd/devices/$pfn/uuid"
    echo ram >"/sys/bus/nd/devices/$pfn/mode"
    echo namespace0.0 >"/sys/bus/nd/devices/$pfn/namespace"
    echo "$pfn" >/sys/bus/nd/drivers/nd_pmem/bind
    [ "$(cat /sys/block/pmem0/queue/dax 2>/dev/null)" = 1 ]
}
fsdax || echo "@@PERSIM-FSDAX-FAILED"
exec </dev/ttyS0 >/dev/ttyS0 2>&1
stty -echo -onlcr
echo "@@PERSIM-READY"
while read -r tag id; do
    [ "$tag" = "@@RUN" ] || continue
    : >/tmp/cmd.b64
    while read -r line; do
        [ "$line" = "." ] && break
        echo "$line" >>/tmp/cmd.b64
    done
    base64 -d /tmp/cmd.b64 >/tmp/cmd.sh
    echo "@@PERSIM-BEGIN $id"
    sh /tmp/cmd.sh </dev/null
    echo "@@PERSIM-END $id $?"
done
