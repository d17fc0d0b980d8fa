# shellcheck shell=sh
# templates/bootstrap/75-preempt.sh - stage preempt: a Spot compute node's
# preemption watcher.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- preemption (templates/preempt.sh, docs/spot.md): on the compute
# nodes of a spot group, a watcher of the cloud's preemption notice that
# drains the node and sends its jobs SIGTERM.  Elsewhere none runs.  It
# runs before slurmd starts: once slurmd registers, a job may start here
# (a woken node's at once), and a notice before the watcher ran lost that
# job's work (vm.gce-spot: the job ran 2 minutes before the bootstrap got
# here, and the preemption came in between).
if [ -n "$SPOT" ]; then
	stage preempt
	watcher_install pbx-preempt preempt.sh
	pwatcher=$WPATH
	pchanged=$CHANGED
	settings_file "$ROOT/etc/pbx/preempt.conf" pbx-preempt "PBX_MODE=$MODE" "PBX_NODE=$NODE" \
		"PBX_ROOT=$ROOT" "SLURM_CONF=$CONF" "PBX_SPOT=$SPOT" \
		${PBX_PREEMPT_POLL:+"PBX_PREEMPT_POLL=$PBX_PREEMPT_POLL"}
	[ "$CHANGED" = 0 ] || pchanged=1
	# a new boot: the notice of an earlier life is over
	rm -f "$ROOT/var/lib/pbx/preempted"
	rm -rf "$ROOT/run/pbx-preempt/acted"
	if [ "$MODE" = systemd ]; then
		watcher_unit pbx-preempt
		[ "$CHANGED" = 0 ] || pchanged=1
	fi
	watcher_run pbx-preempt "$pchanged" 0 "$pwatcher" watch
fi
