#!/bin/sh
# t0465-aws-spot.sh - a spot node preempted mid-task loses nothing, on EC2
# (the moto harness's node bodies; docs/spot.md): the harness gives the
# cluster's spot instance an interruption notice (IMDSv2
# spot/instance-action, 30 s here), the node's pbx-preempt (polling every
# second, PBX_PREEMPT_POLL) drains it and sends the job SIGTERM; pbx-train
# checkpoints and exits 75, the wrapper requeues the job; the harness
# terminates the instance; `pbx cluster start` makes a new node, where the
# task resumes and completes, bit-identical to an uninterrupted twin.
# Subnets 127.0.100.0/25 and 127.0.100.128/26; SLURM ports from 15000 + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.100.0/25 H_SUBNET2=127.0.100.128/26 H_SLURM_PORT_BASE=15000 H_CLUSTERS=ws
. "$(dirname "$0")/aws_lib.sh"

h_start
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  ws:
    cloud: aws
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: $(env_get 'd["ami"]')
    autostop: off
    head: { machine_type: m5.large }
    node_groups:
      - { name: spot, count: 1, machine_type: t3.large, spot: true }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $SUB1 }
  local: { slurm_port_base: 15000 }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"
export PBX_PREEMPT_POLL=1
BODIES=$TEST_TMP/h/bodies
# the running spot instance's id
spot_id() {
	h_py <<'PY'
print(" ".join(i["InstanceId"] for r in c.describe_instances()["Reservations"] for i in r["Instances"]
               if i.get("InstanceLifecycle") == "spot" and i["State"]["Name"] == "running"))
PY
}

run_pbx -q cluster start ws
ok $rc "the cluster starts: $errout"
SPOT=$(spot_id)
[ -n "$SPOT" ]
ok $? "one running spot instance ($SPOT)"
plog=$(find "$BODIES" -path '*/var/log/pbx-preempt.log' 2>/dev/null)
is "$(echo "$plog" | grep -c .)" 1 "one node runs pbx-preempt: the spot node"
wait_for 100 grep -q 'watching for a preemption notice (aws)' "$plog"
ok $? "it watches IMDS: $(cat "$plog" 2>/dev/null)"

spot_train ws

got=$(aws_spot_interrupt "$SPOT")
is "$got" "terminate" "the harness interrupts the spot instance (terminate in 30 s)"
wait_for 200 grep -q 'SIGTERM sent to its batch step' "$plog"
ok $? "pbx-preempt saw the notice and signalled the job"
cp "$plog" "$TEST_TMP/preempt.log" 2>/dev/null
grep -q 'preemption notice ({"action": "terminate", "time": "' "$TEST_TMP/preempt.log"
ok $? "it logged the notice: $(tail -n 3 "$TEST_TMP/preempt.log" | tr '\n' '|')"
wait_for 300 grep -q '^=== pbx task 0 attempt 1 REQUEUED exit 75 ' "$SPOT_T0/stderr"
ok $? "the task checkpointed, exited 75 and was requeued within the notice"
i=0
while [ -n "$(spot_id)" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
is "$(spot_id)" "" "after the notice the spot instance is terminated"

run_pbx -q cluster start ws
ok $rc "start makes the spot node again: $errout"
spot_resumed 300

spot_twin ws

run_pbx -q cluster stop --discard-results ws
ok $rc "stop: $errout"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left"
done_testing
