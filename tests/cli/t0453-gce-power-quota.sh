#!/bin/sh
# t0453-gce-power-quota.sh - a resume that Compute Engine refuses (issue 19,
# section 2; docs/power-saving.md): node2 of a group with min: 1 cannot be
# made (the region's INSTANCES quota allows the head and node1 only), so the
# head's pbx-resume leaves no instance for it, puts it back to sleep and
# marks it DOWN in SLURM with the quota error as the reason; SLURM requeues
# the work, which all completes on node1; the head does not loop making and
# removing node2.  Once the quota allows it and an operator resumes node2
# in SLURM, a job wakes it.  Addresses: the slot's $SLOT_NET.1.0/24
# (private) and $SLOT_NET.2.0/24 (public); SLURM ports from BODY_PORT_BASE
# + 64*8.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
cloud_power_cluster pq "{ name: node, count: 2, min: 1, machine_type: e2-standard-2, cpus: 2 }" \
	"{ suspend_time: 15s, resume_timeout: 240s }" --fault 'quota={"INSTANCES": 2}'
instances() { emu_instances; }
sinfo_of() { "$PBX" cluster exec pq -- sinfo -h -n "$1" -N -o '%t|%E' 2>/dev/null; }
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }

run_pbx -q cluster start pq
ok $rc "a cluster with min: 1 starts: $errout"
is "$(instances)" "head=RUNNING node1=RUNNING" "the head and node1 run; node2 is asleep"
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
nodes_of() { "$pbx_head" cluster show pq --json | json_get '" ".join("%s=%s" % (n["name"], n["state"]) for n in d["nodes"])'; }

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/e.yaml" <<'EXP'
name: quota
command: "sleep 1 && echo done {i}"
sweep: { grid: { i: [1, 2, 3, 4] } }
EXP
run_pbx parrun "$TEST_TMP/exp/e.yaml" pq --cpus-per-task=2
ok $rc "4 tasks submitted (2 CPUs each: one at a time a node): $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
down() { case $(sinfo_of node2) in *"pbx resume failed"*) return 0 ;; esac; return 1; }
wait_for 1800 down
ok $? "SLURM has node2 down with pbx's reason: $(sinfo_of node2)"
case $(sinfo_of node2) in *QUOTA_EXCEEDED* | *[Qq]uota*) r=0 ;; *) r=1 ;; esac
ok $r "the reason is Compute Engine's quota error: $(sinfo_of node2)"
wait_for 1800 queue_empty pq
ok $? "the queue empties with no pbx running here"
wait_final "$pkg" 60
is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED COMPLETED" "every task completed"
is "$(task_nodes "$pkg")" "node1" "all on node1, the node that exists"
is "$(instances)" "head=RUNNING node1=RUNNING" "no instance of node2 exists"
is "$(nodes_of)" "head=up node1=up node2=asleep" "the head's store has node2 asleep again"
resumes=$(power_log | grep -c " resume ")
[ "$resumes" -ge 1 ] && [ "$resumes" -le 2 ]
ok $? "pbx-resume ran $resumes time(s): no loop of making and removing node2 ($(power_log | tail -3 | tr '\n' ' '))"

# the quota allows a third instance; the operator resumes node2 in SLURM
emu_post faults '{"quota": {}}' >/dev/null
run_pbx cluster exec pq -- scontrol update nodename=node2 state=resume
ok $rc "scontrol resumes node2: $errout"
run_pbx cluster exec pq -- srun -N1 -w node2 -c2 hostname
ok $rc "a job on node2 wakes it and runs: $out $errout"
is "$(instances)" "head=RUNNING node1=RUNNING node2=RUNNING" "node2's instance runs"

run_pbx -q cluster stop --discard-results pq
ok $rc "the user's stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"])')" 0 "no instance is left"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
