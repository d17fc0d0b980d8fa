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
# left.  PBX_TEST_KILL_AT (src/util/testkill.h) raises SIGKILL in pbx
# itself, as `kill -9` would.  Addresses: subnets 127.0.127.0/24 and
# 127.0.128.0/24; SLURM ports from 7000 + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.127.0/24 H_SUBNET2=127.0.128.0/24 H_SLURM_PORT_BASE=7000 H_CLUSTERS="pk"
. "$(dirname "$0")/aws_lib.sh"

h_start
ami=$(json_get 'd["ami"]' <"$TEST_TMP/env.json")
sed -i "/^clouds:/i\\
  pk:\\
    cloud: aws\\
    login_user: pbx\\
    ssh_key: $PBX_HOME/id\\
    image: $ami\\
    head: { machine_type: m5.large, instance_profile: pbx-head }\\
    slurm: { suspend_time: 1h, resume_timeout: 240s }\\
    node_groups:\\
      - { name: node, count: 1, min: 0, machine_type: t3.large, cpus: 2 }" "$PBX_HOME/config.yaml"
BODIES=$TEST_TMP/h/bodies
# The cluster's live instances as ROLE=STATE (pbx-role tag), sorted.
instances() {
	h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["pk"]}])["Reservations"]:
    for i in r["Instances"]:
        if i["State"]["Name"] not in ("terminated", "shutting-down"):
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            out.append("%s=%s" % (tags.get("pbx-role", "?"), i["State"]["Name"]))
print(" ".join(sorted(out)) or "-")
PY
}

run_pbx -q cluster start pk
ok $rc "a cluster with min: 0 starts: $errout"
is "$(instances)" "head=running" "only the head runs"
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
node1_state() { "$pbx_head" cluster show pk --json | json_get '[n["state"] for n in d["nodes"] if n["name"] == "node1"][0]'; }

# kill_at POINT STATE MADE: the head's resume killed at POINT leaves node1
# in STATE in the head's store, with its instance MADE (yes or no)
kill_at() {
	PBX_TEST_KILL_AT=$1 "$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
	is "$?" "137" "the resume killed at $1 (SIGKILL)"
	is "$(node1_state)" "$2" "killed at $1: node1 is $2 in the head's store"
	case $3:$(instances) in "no:head=running" | yes:*node=*) r=0 ;; *) r=1 ;; esac
	ok $r "killed at $1: node1's instance asked for: $3 ($(instances))"
	"$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
	ok $? "the next resume after a kill at $1 goes on: $(cat "$TEST_TMP/k.out")"
	is "$(node1_state)" "up" "node1 is up"
	is "$(instances)" "head=running node=running" "one instance of node1 runs"
	run_pbx cluster exec pk -- srun -N1 -w node1 -c2 hostname
	ok $rc "a job runs on node1, found by name: $out $errout"
	"$pbx_head" -q cluster power pk suspend node1 >"$TEST_TMP/k.out" 2>&1
	ok $? "suspend: $(cat "$TEST_TMP/k.out")"
	is "$(node1_state):$(instances)" "asleep:head=running" "node1 asleep again, its instance gone"
}
kill_at power:1 waking no
kill_at create:1 creating yes
kill_at start:1 running yes
kill_at start:2 bootstrapping yes
is "$(holds)" "1 1 2" "the head's instance, the group, and the user's and the head's key pairs"

PBX_TEST_KILL_AT=create:1 "$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
is "$?" "137" "a last resume killed at create:1"
run_pbx -q cluster stop pk
ok $rc "the user's stop: $errout"
is "$(holds)" "0 0 0" "no instance (node1's, which the user's store never knew, included), group or key pair is left"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
