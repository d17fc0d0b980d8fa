#!/bin/sh
# power-ready.sh - pbx-ready, SLURM's PrologSlurmctld on a cluster with
# power saving (docs/power-saving.md, "A batch job on woken nodes"):
# pbx stages it with its settings filled in (src/cluster/slurm_sleep_steps.c) and
# the head's bootstrap installs it in /usr/local/lib/pbx beside pbx-resume.
#
# SLURM 22.05 keeps a batch job on nodes it powers up CONFIGURING until
# slurmctld's next periodic pass (every 30 s) after they respond; srun
# polls by itself and does not wait.  While a PrologSlurmctld runs the job
# waits, and when it ends slurmctld launches the job at once if its nodes
# respond.  So this waits for the job's nodes that may sleep to respond
# and then ends: batch tasks on woken nodes start seconds after the nodes
# do, not up to 30 s later.
#
# Its end is always safe: slurmctld checks the nodes itself, and the
# periodic pass takes any job this lets go early.  So it ends at once for
# a job on nodes that always run (one fork, no request), on any node
# state that will not come up by itself (down, drained, failing), after
# the resume timeout, and on any error; and it always exits 0, as a
# PrologSlurmctld that fails requeues the job held.  Many jobs waiting at
# once (a sweep's tasks) ask SLURM once a second in all: one of them, the
# holder of a lock, writes every node's state with the time into a file
# in slurmctld's state directory, and each reads its own nodes there.
#
# SLURM gives SLURM_JOB_NODELIST.  Settings (filled in by pbx):
SLURM_CONF=@SLURM_CONF@
STATE_DIR=@STATE_DIR@
SLEEPERS=@SLEEPERS@
TIMEOUT=@TIMEOUT@
export SLURM_CONF
PATH="$PATH:/usr/local/bin:/usr/bin:/bin"
# exit 0 whatever happens (a redirection's error ends a shell with 2)
trap 'exit 0' EXIT

# the job's nodes that may sleep, "node2,node3" (names of the template's
# only: SLEEPERS is pbx's)
nodes=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null |
	awk -v s=",$SLEEPERS," 'index(s, "," $0 ",") { printf "%s%s", n++ ? "," : "", $0 }')
[ -n "$nodes" ] || exit 0
state=$STATE_DIR/pbx-ready.state
touch "$STATE_DIR/pbx-ready.lock" 2>/dev/null || exit 0
exec 9>>"$STATE_DIR/pbx-ready.lock"

# Every node's "NAME STATE" below a first line of the time it was asked,
# asked again by the lock's holder when it is older than this second.
refresh() {
	now=$(date +%s)
	flock -n 9 || return 0
	if [ "$(head -n 1 "$state" 2>/dev/null)" != "$now" ]; then
		{ echo "$now" && sinfo -h -N -o '%N %t'; } >"$state.new" 2>/dev/null &&
			mv -f "$state.new" "$state"
	fi
	flock -u 9
}

i=0
while [ "$i" -lt "$TIMEOUT" ]; do
	refresh
	st=$(awk -v s=",$nodes," 'NR > 1 && index(s, "," $1 ",") { print $2 }' "$state" 2>/dev/null)
	case $st in
	'') ;; # not asked yet
	*down* | *drain* | *drng* | *fail*) exit 0 ;;
	# powering up (#), powered down (~), powering down (%), not responding (*)
	*'#'* | *'~'* | *'%'* | *'*'*) ;;
	*) exit 0 ;;
	esac
	sleep 1
	i=$((i + 1))
done
exit 0
