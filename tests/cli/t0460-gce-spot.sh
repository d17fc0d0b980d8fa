#!/bin/sh
# t0460-gce-spot.sh - a spot node preempted mid-task loses nothing
# (issue 19, section 3; docs/spot.md), on the Compute Engine emulator's
# node bodies.  A cluster with one Spot compute node runs a pbx-train
# task; the emulator preempts the node (preempted TRUE in its metadata,
# 30 s of notice, then the instance is deleted: pbx makes Spot nodes with
# instanceTerminationAction DELETE).  The node's pbx-preempt sees the
# notice, drains the node and sends the job SIGTERM; pbx-train writes its
# checkpoint and exits 75, its wrapper requeues the job; `pbx cluster
# start` makes the node again, where the task resumes from its checkpoint
# and completes, with final parameters bit-identical to an uninterrupted
# twin's.  The on-demand head runs no watcher.  Emulator addresses
# $SLOT_NET.1.0/25 (private) and $SLOT_NET.1.128/25 (public); SLURM ports from
# BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"

stop_at_exit sp
gce_emulator "$SLOT_NET.1.0/25" "$SLOT_NET.1.128/25" --preempt-notice 30
mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0460 -f "$PBX_HOME/id"
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  sp:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    autostop: off
    node_groups:
      - { name: spot, count: 1, machine_type: e2-standard-4, spot: true }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
  local: { slurm_port_base: $BODY_PORT_BASE }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"
BODIES=$TEST_TMP/emu/bodies
# name_of ROLE: the emulator's instance with label pbx-role ROLE
name_of() {
	emu_get state | python3 -c 'import json, sys
print(" ".join(i["name"] for i in json.load(sys.stdin)["instances"] if i["labels"].get("pbx-role") == sys.argv[1]))' "$1"
}

run_pbx -q cluster start sp
ok $rc "the cluster starts: $errout"
NODE=$(name_of compute)
HEAD=$(name_of head)
[ -n "$NODE" ] && [ -n "$HEAD" ]
ok $? "a head ($HEAD) and a spot node ($NODE)"
plog=$(find "$BODIES" -path '*/var/log/pbx-preempt.log' 2>/dev/null)
is "$(echo "$plog" | grep -c .)" 1 "one node runs pbx-preempt: the spot node"
wait_for 100 grep -q 'watching for a preemption notice (gce)' "$plog"
ok $? "it watches the metadata server: $(cat "$plog" 2>/dev/null)"
conf=$(find "$BODIES" -path '*/etc/pbx/preempt.conf')
grep -q "^PBX_SPOT='gce'\$" "$conf"
ok $? "its settings name the cloud"

spot_train sp

op=$(gce_preempt "$NODE")
is "$op" "compute.instances.preempted" "the emulator preempts the spot node (30 s of notice)"
wait_for 200 grep -q 'SIGTERM sent to its batch step' "$plog"
ok $? "pbx-preempt saw the notice and signalled the job"
cp "$plog" "$TEST_TMP/preempt.log" 2>/dev/null
grep -q 'preemption notice (instance/preempted is TRUE): draining' "$TEST_TMP/preempt.log"
ok $? "it logged the notice: $(tail -n 3 "$TEST_TMP/preempt.log" | tr '\n' '|')"
wait_for 300 grep -q '^=== pbx task 0 attempt 1 REQUEUED exit 75 ' "$SPOT_T0/stderr"
ok $? "the task checkpointed, exited 75 and was requeued within the notice"
grep -q '^pbx-train: SIGTERM at step [0-9]*: checkpoint written' "$SPOT_T0/stderr"
ok $? "pbx-train wrote its checkpoint on SIGTERM"
i=0
while [ -n "$(name_of compute)" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
is "$(name_of compute)" "" "after the notice the Spot instance is gone (instanceTerminationAction DELETE)"
is "$(procs_mentioning "$BODIES/pbx-test/us-central1-a/$(printf '%s' "$NODE" | sha1sum | cut -c1-10)/")" "" \
	"no process of the preempted body is left"

run_pbx -q cluster start sp
ok $rc "start makes the spot node again: $errout"
sqlite3 "$PBX_HOME/pbx.db" "SELECT detail FROM events WHERE kind = 'node.new-instance'" | grep -q '^spot1: a new instance'
ok $? "the new instance's host key is pinned afresh (not refused as changed)"
spot_resumed 300

spot_twin sp

run_pbx -q cluster stop --discard-results sp
ok $rc "stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"])')" "0" "no instance is left"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
done_testing
