# Prints a file the guest wrote (the placeholder below): the recovered state that
# `fs-dump` (or the test's state command) wrote, or the kernel log, with console messages
# below KERN_EMERG held back so that no kernel message lands inside it. A panic is still printed (and detected).
level=$(cut -f1 /proc/sys/kernel/printk)
echo 1 >/proc/sys/kernel/printk
cat @STATE_FILE@
rc=$?
echo "$level" >/proc/sys/kernel/printk
exit $rc
