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
# No address-space randomisation: programs under test load at the same addresses in every
# run, so their pcs and stacks in traces compare between runs.
echo 0 >/proc/sys/kernel/randomize_va_space
for m in $(cat /etc/persim/modules); do
    insmod "/lib/persim-modules/$m" || echo "@@PERSIM-MODULE-FAILED $m"
done
# fsdax mode for the NVDIMM (see persim-pmem).
persim-pmem fsdax || echo "@@PERSIM-FSDAX-FAILED"
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
