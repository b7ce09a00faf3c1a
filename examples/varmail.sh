# A varmail-like small-file workload (after Filebench's varmail): 60 mail files, each
# created, written (16 KiB), fsynced, appended to (4 KiB), fsynced and read; from the 21st on,
# the file 20 before is deleted. Run in /mnt by the tracer (docs/design/analysis.md):
#   persim trace --fs ext4 --stack-traces --cmd "$(cat examples/varmail.sh)" -o T
set -e
mkdir mail
i=1
while [ $i -le 60 ]; do
    f=mail/m$i
    fs-ops creat $f
    fs-ops write $f 0 16384
    fs-ops fsync $f
    fs-ops write $f 16384 4096
    fs-ops fsync $f
    cat $f > /dev/null
    if [ $i -gt 20 ]; then fs-ops unlink mail/m$((i - 20)); fi
    i=$((i + 1))
done
