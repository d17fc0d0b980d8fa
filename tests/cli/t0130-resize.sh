#!/bin/sh
# t0130-resize.sh - `pbx cluster resize` on the local provider: +2 adds
# two bootstrapped nodes SLURM can use; -1 drains the last node and waits
# for its job (giving up after --timeout with the node left drained);
# --force takes it now and SLURM requeues its job; the node's processes and
# directory are gone and SLURM no longer lists it; a later `start` keeps the
# new size; bad counts and groups are refused before anything changes.
# The group's gpu_type becomes a typed GRES (gpu:t4) on old and new nodes.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster rs slot "{ name: node, count: 1, gpus: 1, gpu_type: nvidia-tesla-t4 }"
CDIR="$PBX_HOME/clusters/rs"
nodes() { "$PBX" cluster exec rs -- sinfo -h -N -o '%N %t' 2>/dev/null | sort | tr '\n' ' '; }

run_pbx -q cluster start rs
ok $rc "cluster starts with one node: $errout"

# ---- refusals: nothing changes
run_pbx cluster resize rs -2
is "$rc" 2 "removing more nodes than the group has is refused (exit 2)"
echo "$errout" | grep -q "group node of cluster rs has 1 node: cannot remove 2"
ok $? "the message names the group and its size: $errout"
run_pbx cluster resize rs -1
is "$rc" 2 "removing the last compute node is refused"
echo "$errout" | grep -q "keeps at least one compute node"
ok $? "the message says why and points at stop: $errout"
run_pbx cluster resize rs +1 --group gpu
is "$rc" 2 "an unknown group is refused"
echo "$errout" | grep -q "has no node group 'gpu' (it has: node)"
ok $? "the message lists the groups: $errout"
run_pbx cluster resize rs +0
is "$rc" 2 "+0 is a usage error"
run_pbx cluster resize rs +1 --dry-run
is "$rc" 2 "--dry-run on a local cluster says it sends no requests"
run_pbx cluster resize nosuch +1
is "$rc" 3 "an unknown cluster: exit 3"
is "$(nodes)" "node1 idle " "after the refusals the cluster is as it was"

# ---- grow
run_pbx cluster resize rs +2
ok $rc "resize +2 succeeds: $errout"
echo "$errout" | grep -q "node3  idle"
ok $? "progress shows the new node3 idle"
is "$(nodes)" "node1 idle node2 idle node3 idle " "SLURM has 3 idle nodes"
run_pbx cluster exec rs -- srun -N3 sh -c 'echo $SLURMD_NODENAME'
is "$(echo "$out" | sort | tr '\n' ' ')" "node1 node2 node3 " "srun -N3 runs on the new nodes too"
run_pbx cluster exec rs -- sinfo -h -N -o '%N %G'
is "$(echo "$out" | sort | tr '\n' ' ')" "node1 gpu:t4:1 node2 gpu:t4:1 node3 gpu:t4:1 " \
	"every node has a typed GPU GRES (gpu_type nvidia-tesla-t4 -> t4)"
run_pbx cluster exec rs -- srun -N3 --gres=gpu:t4:1 sh -c 'echo $CUDA_VISIBLE_DEVICES'
is "$(echo "$out" | tr '\n' ' ')" "0 0 0 " "srun --gres=gpu:t4:1 gets a GPU on each node"
run_pbx cluster exec rs -- srun -N1 --gres=gpu:1 sh -c 'echo $CUDA_VISIBLE_DEVICES'
is "$out" "0" "an untyped --gres=gpu:1 still matches the typed GPUs"
run_pbx cluster show --json rs
is "$(echo "$out" | json_get "len([n for n in d['nodes'] if n['role'] == 'compute'])")" 3 \
	"the store lists 3 compute nodes"

# ---- shrink: a job on node3 holds the drain (three whole-node jobs, one a node)
for k in 1 2 3; do
	"$PBX" -q cluster exec rs -- sbatch --parsable --requeue --exclusive --wrap 'sleep 600' >/dev/null
done
# the drain below needs a job running on node3: wait for it (2 minutes at
# most: a loaded machine)
JOB=
on_node3() {
	JOB=$("$PBX" cluster exec rs -- squeue -h -t RUNNING -o '%i %N' 2>/dev/null | awk '$2 == "node3" {print $1}')
	[ -n "$JOB" ]
}
wait_secs 120 on_node3
ok $([ -n "$JOB" ]; echo $?) "a job runs on node3 (job $JOB)"
run_pbx cluster resize rs -1 --timeout 3
is "$rc" 1 "resize -1 gives up after --timeout while node3 runs a job"
echo "$errout" | grep -q "nodes still running jobs after 3 s: node3="
ok $? "the message names the busy node and --force: $errout"
echo "$(nodes)" | grep -Eq "node3 (drng|drain)"
ok $? "node3 is left draining: $(nodes)"
[ -d "$CDIR/nodes/node3" ]
ok $? "node3 still exists"

run_pbx cluster resize rs -1 --force
ok $rc "resize -1 --force succeeds: $errout"
is "$(nodes)" "node1 alloc node2 alloc " "SLURM no longer lists node3 (the other two run their jobs)"
[ ! -e "$CDIR/nodes/node3" ]
ok $? "node3's directory is gone"
is "$(procs_mentioning "$CDIR/nodes/node3/")" "" "no process of node3 is left"
state=$("$PBX" cluster exec rs -- squeue -h -j "$JOB" -o %T 2>/dev/null)
case $state in PENDING|RUNNING|CONFIGURING) r=0 ;; *) r=1 ;; esac
ok $r "the job that ran on node3 is requeued, not lost (state $state)"
"$PBX" -q cluster exec rs -- scancel -u root >/dev/null 2>&1

# ---- shrink without jobs: the drain is immediate; start keeps the size
run_pbx cluster resize rs -1
ok $rc "resize -1 of an idle node succeeds: $errout"
is "$(nodes)" "node1 idle " "one node left"
run_pbx -q cluster start rs
ok $rc "start after the resizes: $errout"
is "$(nodes)" "node1 idle " "start after the shrinks: still one node, none brought back"
run_pbx cluster resize rs +1
ok $rc "grow again: $errout"
run_pbx -q cluster start rs
is "$(nodes)" "node1 idle node2 idle " "start keeps the resized size (2), not the template's (1)"

run_pbx -q cluster stop --discard-results rs
ok $rc "stop: $errout"
is "$(procs_mentioning "$CDIR/")" "" "nothing of the cluster is left"
done_testing
