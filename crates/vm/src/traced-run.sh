# The traced run (`persim trace`): the user's commands, in /mnt, between `hypercall start`
# and `hypercall success` (exit code 0) or `hypercall fail`; exits with their exit code.
# The placeholder line in the subshell is replaced with the commands (the only place the
# placeholder may appear: commands are multi-line); the subshell keeps `exit` and `cd` inside.
cd /mnt
hypercall start
(
@COMMAND@
)
rc=$?
if [ $rc -eq 0 ]; then hypercall success; else hypercall fail; fi
exit $rc
