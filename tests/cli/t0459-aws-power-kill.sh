#!/bin/sh
# t0459-aws-power-kill.sh - the head's resume program killed with SIGKILL
# on EC2 (issue 19, section 2; docs/power-saving.md "On EC2"), at four
# points: node1 marked waking before anything is asked (power:1), its
# instance asked for (RunInstances answered) before the start goes on
# (create:1), made but not bootstrapped (start:1), bootstrapped before
# SLURM sees it (start:2).  Each time the next resume goes on with one
# instance of node1 (the one a killed resume asked for is taken, not made
# twice) and node1 runs a job.  Last, a resume killed at create:1 and then
# the user's `stop`, whose store never heard of the instance nor of the
# head's key pair: both are found by the cluster's tags, and nothing is
# left.  Between them, with the head's subnet out of capacity, a resume
# makes node1 in the next subnet of clouds.aws.subnets, where a job finds
# it by name.  PBX_TEST_KILL_AT (src/util/testkill.h) raises SIGKILL in pbx
# itself, as `kill -9` would.  Addresses: subnets $SLOT_NET.1.0/24 and
# $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS="pk"
. "$(dirname "$0")/aws_lib.sh"

h_start
sed -i "s#subnet: $SUB1 }#subnet: $SUB1, subnets: [$SUB1, $SUB2] }#" "$PBX_HOME/config.yaml"
aws_power_cluster pk "{ name: node, count: 1, min: 0, machine_type: t3.large, cpus: 2 }" "{ suspend_time: 1h, resume_timeout: 240s }"
instances() { aws_instances pk; }

run_pbx -q cluster start pk
ok $rc "a cluster with min: 0 starts: $errout"
is "$(instances)" "head=running" "only the head runs"
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
PK_ASLEEP="head=running" PK_AWAKE="head=running node=running" PK_NODE1="node="
power_kill_at pk power:1 waking no
power_kill_at pk create:1 creating yes
power_kill_at pk start:1 running yes
power_kill_at pk start:2 bootstrapping yes
is "$(holds)" "1 1 2" "the head's instance, the group, and the user's and the head's key pairs"

# the head's subnet out of capacity: the resume's RunInstances goes to the
# next subnet, and the head finds node1 there by name
capacity() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "_harness/capacity", data=sys.argv[2].encode())).read().decode())' "$URL" "$1"; }
capacity "[\"$SLOT_NET.1.0/24\"]" >/dev/null
"$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
ok $? "with the first subnet out of capacity node1 wakes: $(cat "$TEST_TMP/k.out")"
capacity '[]' >/dev/null
node_subnet() { h_py <<'PY'
print(" ".join(i["SubnetId"] for r in c.describe_instances(Filters=[{"Name": "tag:pbx-role", "Values": ["node"]},
      {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]))
PY
}
is "$(node_subnet):$(calls faults InsufficientInstanceCapacity)" "$SUB2:1" "in the second subnet, after one capacity error"
run_pbx cluster exec pk -- srun -N1 -w node1 -c2 hostname
ok $rc "a job runs on node1 there: $errout"
"$pbx_head" -q cluster power pk suspend node1 >"$TEST_TMP/k.out" 2>&1
ok $? "node1 sleeps again: $(cat "$TEST_TMP/k.out")"

# As in t0454: a resume killed at create:1 leaves node1's instance running
# while SLURM has node1 asleep; an idle stop of the head (its watcher, run
# here with a 10 s autostop) removes it too, not only the nodes SLURM has
# awake
stray_resume_idle_stop pk "head=running node=running" "head=stopped"
run_pbx -q cluster start pk
ok $rc "the user's start brings the head back: $errout"

PBX_TEST_KILL_AT=create:1 "$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
is "$?" "137" "a last resume killed at create:1"
run_pbx -q cluster stop --discard-results pk
ok $rc "the user's stop: $errout"
is "$(holds)" "0 0 0" "no instance (node1's, which the user's store never knew, included), group or key pair is left"
# the harness ends a terminated instance's body on its next look (0.2 s)
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
