#!/bin/sh
# t0220-node-failure.sh - a task whose node dies (slurmd, slurmstepd and
# the task killed, the node then marked DOWN as slurmctld would after
# SlurmdTimeout) is reported by `pbx state` and can be rerun: SLURM
# requeues it (pbx submits with --requeue) or, once its job is gone,
# `pbx state` reports NODE_FAIL and `pbx rerun --failed` submits it again.
# `pbx cluster start` then brings the node back.
. "$(dirname "$0")/lib.sh"

local_cluster nf slot "{ name: node, count: 2, gpus: 2 }"
CDIR="$PBX_HOME/clusters/nf"
task_field() { "$PBX" state --json "$PKG" 2>/dev/null | json_get "d['tasks'][$1]['$2']"; }

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EOF'
name: node-failure
command: sleep {secs}; echo finished
sweep:
  list:
    - { secs: 600 }
resources: { gres: "gpu:2" }
EOF
run_pbx -q cluster start nf
ok $rc "cluster starts: $errout"
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" nf
PKG=$(echo "$out" | json_get 'd["package"]')
# Running, and the wrapper has written its status (node known): only then
# can its node die under it (2 minutes at most: a loaded machine).
on_node() { [ "$(task_field 0 state)" = RUNNING ] && [ "$(task_field 0 node)" != None ]; }
wait_secs 120 on_node
node=$(task_field 0 node)
is "$(task_field 0 state)" "RUNNING" "the task runs (on $node)"

# The node dies: its slurmd, its slurmstepd and the task, all at once -
# only processes of this test's cluster (other tests run clusters too).
printf '%s\n' "$CDIR/" >"$TEST_TMP/mine"
printf 'SLURMD_NODENAME=%s\n' "$node" >"$TEST_TMP/pat"
printf 'PBX_NODE=%s\n' "$node" >>"$TEST_TMP/pat"
victims=$(for f in /proc/[0-9]*/environ; do
	grep -q -s -a -F -f "$TEST_TMP/mine" "$f" && grep -q -s -a -F -f "$TEST_TMP/pat" "$f" || continue
	p=${f#/proc/}; echo "${p%%/*}"; done | grep -v "^$$\$" | tr '\n' ' ')
kill -9 $victims 2>/dev/null
# dead (gone, or a zombie) before SLURM is told
dead() {
	for p in $victims; do
		st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
		case $st in '' | Z) ;; *) return 1 ;; esac
	done
	return 0
}
wait_secs 30 dead
ok $? "the node's processes are dead"
run_pbx cluster exec nf -- scontrol update nodename="$node" state=down reason=node-died
ok $rc "slurmctld marks $node down"
sleep 2
st=$(task_field 0 state)
case $st in PENDING | RUNNING | NODE_FAIL) ok 0 "pbx state reports the task as $st after its node died" ;;
*) ok 1 "pbx state reports the task as '$st' after its node died" ;; esac

# Remove the requeued job, as if SLURM had given up on it: pbx must see the
# task died while running.
run_pbx cluster exec nf -- scancel -n "pbx-$PKG"
ok $rc "scancel of the requeued job: $errout"
no_job() { [ -z "$("$PBX" cluster exec nf -- squeue -h -n "pbx-$PKG" -o %i 2>/dev/null)" ]; }
wait_secs 60 no_job
ok $? "SLURM no longer lists it"
# The wrapper was killed with its node, so its status still says RUNNING.
is "$(task_field 0 state)" "NODE_FAIL" "a task that died with its node is NODE_FAIL"
run_pbx rerun --failed "$PKG"
is "$rc:$out" "0:resubmitted 1 task of $PKG" "rerun --failed resubmits it"
run_pbx -q cluster start nf
ok $rc "cluster start brings $node back: $errout"
run_pbx cluster exec nf -- sinfo -h -n "$node" -o '%t'
case $out in idle | alloc | mix) ok 0 "$node is up again ($out)" ;; *) ok 1 "$node is up again ('$out')" ;; esac
# running again before it is cancelled (a cancel of a pending task is
# another story)
wait_secs 120 prints RUNNING task_field 0 state
is "$(task_field 0 state)" "RUNNING" "the rerun task runs again"
run_pbx cancel "$PKG:0"
ok $rc "cancel PKG:0: $errout"
# pbx cancel remembers what it cancelled: from now on the task reads
# RUNNING (SLURM still winding the job down) or CANCELLED, never NODE_FAIL
# or MISSING, even before its wrapper writes its final status.
i=0 seen=
while st=$(task_field 0 state) && [ "$st" != CANCELLED ] && [ $i -lt 30 ]; do
	seen="$seen $st"; sleep 1; i=$((i + 1)); done
is "$st" "CANCELLED" "a cancelled task is CANCELLED"
case $seen in *NODE_FAIL* | *MISSING*) ok 1 "states seen after cancel:$seen" ;;
*) ok 0 "after cancel the task read only RUNNING/CANCELLED ($seen )" ;; esac
done_testing
