#!/bin/sh
# t0135-power-saving.sh - SLURM power saving on the local cluster
# (docs/power-saving.md): a group with min: 0 and max: 4 starts
# with no compute node made (SLURM knows them as CLOUD, powered down); an
# 8-task sweep submitted with no pbx running on the user's side makes
# slurmctld run the head's pbx-resume, which makes and bootstraps the nodes;
# every task completes; after slurm.suspend_time idle, pbx-suspend removes
# the nodes' processes (the head stays); a second sweep wakes them again;
# `resize` refuses the group; `stop` leaves nothing.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster ps slot "{ name: node, count: 4, min: 0, cpus: 2 }" \
	"slurm: { suspend_time: 15s, resume_timeout: 300s }"
CDIR="$PBX_HOME/clusters/ps"
sinfo_states() { "$PBX" cluster exec ps -- sinfo -h -N -o '%N %t' 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; }

run_pbx cluster start ps
ok $rc "a cluster with min: 0 starts: $errout"
all_procs() { echo "$(body_procs node1):$(body_procs node2):$(body_procs node3):$(body_procs node4)"; }
is "$(node_states)" "head:up node1:asleep node2:asleep node3:asleep node4:asleep" \
	"only the head is made; the 4 nodes are asleep"
is "$(all_procs)" "0:0:0:0" "no process of any node runs"
is "$(sinfo_states)" "node1 idle~ node2 idle~ node3 idle~ node4 idle~" "SLURM knows them powered down (idle~)"
run_pbx cluster exec ps -- sh -c 'grep -E "^(ResumeProgram|SuspendProgram|SuspendTime|SuspendExcNodes|TreeWidth)=" "$SLURM_CONF" | sed "s#=.*/#=#"'
is "$out" "ResumeProgram=pbx-resume
SuspendProgram=pbx-suspend
SuspendTime=15
TreeWidth=65533" "slurm.conf runs pbx-resume and pbx-suspend, suspend after 15 s, nothing excluded (min: 0), slurmctld talks to every node itself"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/e.yaml" <<'EXP'
name: wake
command: "sleep 2 && hostname > out.txt && echo done {i}"
sweep: { grid: { i: [1, 2, 3, 4, 5, 6, 7, 8] } }
EXP
run_pbx parrun "$TEST_TMP/exp/e.yaml" ps --cpus-per-task=2
ok $rc "8 tasks submitted: $errout"
# from here no pbx runs on the user's side until the tasks are done:
# slurmctld runs pbx-resume by itself
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_for 1800 queue_empty ps
ok $? "the queue empties with no pbx running here"
wait_final "$pkg" 60
is "$(task_states "$pkg")" \
	"COMPLETED COMPLETED COMPLETED COMPLETED COMPLETED COMPLETED COMPLETED COMPLETED" \
	"every task completed on the nodes SLURM woke"
is "$(task_nodes "$pkg")" "node1 node2 node3 node4" \
	"on the 4 nodes (2 CPUs a task, 2 a node)"
is "$(node_states)" "head:up node1:up node2:up node3:up node4:up" "the store has them up"
# a batch job on woken nodes is launched when pbx-ready (PrologSlurmctld)
# ends, once its nodes respond, not at slurmctld's periodic pass (30 s)
ctld_log=$CDIR/nodes/head/var/log/slurm/slurmctld.log
by_prolog=$(grep -c 'prolog_running_decr: Configuration for' "$ctld_log")
by_pass=$(grep -c 'job_time_limit: Configuration for' "$ctld_log")
[ "$by_prolog" -ge 1 ] && [ "$by_pass" = 0 ]
ok $? "every task on the woken nodes was launched as pbx-ready ended ($by_prolog), none by the periodic pass ($by_pass)"
grep -c " resume " "$CDIR/nodes/head/var/log/pbx-power.log" >"$TEST_TMP/resumes"
ok $? "the head's pbx-power.log has the resume: $(cat "$CDIR/nodes/head/var/log/pbx-power.log" 2>/dev/null | head -5)"

# idle for suspend_time: SLURM runs pbx-suspend
asleep() { [ "$(node_states)" = "head:up node1:asleep node2:asleep node3:asleep node4:asleep" ]; }
wait_for 1200 asleep
ok $? "after 15 s idle the 4 nodes are asleep again: $(node_states)"
wait_for 100 prints "0:0:0:0" all_procs
is "$(all_procs)" "0:0:0:0" "their processes are gone"
[ "$(body_procs head)" -gt 0 ]
ok $? "the head still runs"
wait_for 900 prints "node1 idle~ node2 idle~ node3 idle~ node4 idle~" sinfo_states
is "$(sinfo_states)" "node1 idle~ node2 idle~ node3 idle~ node4 idle~" "SLURM has them powered down"

# again: a job wakes one node
run_pbx cluster exec ps -- srun -N1 -c2 hostname
ok $rc "srun wakes a node again (made anew, a new host key) and runs: $out $errout"
[ $rc = 0 ] || sed 's/^/# /' "$CDIR/nodes/head/var/log/pbx-power.log"

# names from SLURM's host list are only ever matched against the store's:
# one that is no node power saving makes is a usage error, and nothing is done
before=$(node_states)
run_pbx cluster power ps suspend node1 head '../head' 'node1; touch x' '$(touch y)'
is "$rc:$(node_states):$(body_procs head | grep -c '^0$')" "2:$before:0" \
	"suspend naming the head or hostile names: exit 2, nothing done ($before)"
case $errout in *"'head' is not a node of cluster ps that power saving makes and removes: nothing done"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the first: $errout"
[ ! -e x ] && [ ! -e y ] && [ ! -e "$CDIR/x" ]
ok $? "and runs nothing"
for names in "node9" "../../x" "" "node0" "head"; do
	run_pbx cluster power ps resume node1 "$names"
	is "$rc:$(node_states)" "2:$before" "resume naming '$names' (no node that sleeps): exit 2, nothing done"
done
run_pbx cluster power ps wake node1
is "$rc" "2" "an action other than resume or suspend is a usage error"

run_pbx cluster resize ps +1
is "$rc" "2" "resize refuses a power-saving group"
case $errout in *"saves power (min: 0, max: 4)"*) r=0 ;; *) r=1 ;; esac
ok $r "and says why: $errout"

run_pbx cluster stop --discard-results ps
ok $rc "stop: $errout"
is "$(ps -eo args= | grep -F "$CDIR/" | grep -cv grep)" "0" "no process of the cluster is left"
done_testing
