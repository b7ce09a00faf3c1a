#!/bin/busybox sh
# PID 1 of the Persim guest: loads the modules, then runs commands: first those QEMU's
# command line gave it (fw_cfg file opt/persim/commands), then those from the serial console.
# Protocol (runner -> guest): "@@RUN <id>", base64 lines of a shell script, ".".
# Guest -> runner: "@@PERSIM-BEGIN <id>", the script's output, "@@PERSIM-END <id> <exit code>".
# The first commands end at the first that fails. They run before any console input, so
# under -icount a test set up and traced by them runs the same instructions in every run
# (docs/design/tracer.md, "Reproducibility"); a guest saved as a booted snapshot waits for them in
# `fw-cfg --wait`, which the QEMU it is restored in answers.
/bin/busybox --install -s /bin
export PATH=/bin:/usr/sbin:/usr/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /mnt
# No address-space randomisation: programs under test load at the same addresses in every
# run, so their pcs and stacks in traces compare between runs.
echo 0 >/proc/sys/kernel/randomize_va_space
# insmod, unlike modprobe, does not take a module's options from the kernel command line
# (`nvme.sgl_threshold=0`): they are passed on here.
for m in $(cat /etc/persim/modules); do
    options=$(tr ' ' '\n' </proc/cmdline | sed -n "s/^${m%.ko}\.//p")
    insmod "/lib/persim-modules/$m" $options || echo "@@PERSIM-MODULE-FAILED $m"
done
# fsdax mode for the NVDIMM (see persim-pmem).
persim-pmem fsdax || echo "@@PERSIM-FSDAX-FAILED"
exec </dev/ttyS0 >/dev/ttyS0 2>&1
stty -echo -onlcr
echo "@@PERSIM-READY"
# Runs the framed commands on stdin; with "first", stops after one that fails.
run_commands() {
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
        rc=$?
        echo "@@PERSIM-END $id $rc"
        [ "$1" = first ] && [ $rc -ne 0 ] && break
    done
}
fw-cfg --wait opt/persim/commands >/tmp/first-commands
# Under -icount, the CPU must not halt while they run (see stay-busy); the first line says.
busy=
if head -n 1 /tmp/first-commands | grep -q stay-busy; then
    stay-busy &
    busy=$!
fi
run_commands first </tmp/first-commands
[ -n "$busy" ] && kill $busy
run_commands
