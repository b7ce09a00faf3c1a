# The traced run (`persim trace`): the user's commands, in /mnt, between `hypercall start`
# and `hypercall success` (exit code 0) or `hypercall fail`; exits with their exit code.
# The commands run as one `sh -c` word (the placeholder, replaced with them quoted), so
# `exit` and `cd` stay inside; under `user-maps record`, which keeps where the programs they
# ran had their code, for the trace's symbols (docs/design/tracer.md, "Symbols").
cd /mnt
# With an NVMe SSD: what setup wrote is on it before the initial copy is taken at `start`,
# and a controller reset right after `start` lets the plugin, tracing from then on, see the
# queues being created (it decodes commands from them: docs/design/tracer.md, "Block devices").
nvme_reset=/sys/class/nvme/nvme0/reset_controller
[ -e $nvme_reset ] && sync
hypercall start
[ -e $nvme_reset ] && echo 1 >$nvme_reset
user-maps record @USER_MAPS@ -- sh -c @COMMAND@
rc=$?
if [ $rc -eq 0 ]; then hypercall success; else hypercall fail; fi
exit $rc
