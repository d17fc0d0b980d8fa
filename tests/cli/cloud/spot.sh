# cloud/spot.sh - one body for t0460 (CLOUD=gce) and t0465 (CLOUD=aws),
# sourced after lib.sh: a spot node preempted mid-task loses nothing
# (docs/spot.md), on the emulators' node bodies.  A cluster with one spot
# compute node (the on-demand head runs no watcher) runs a pbx-train task;
# the cloud preempts the node (30 s of notice: Compute Engine's preempted
# TRUE in its metadata, then the instance is deleted, as pbx makes Spot
# nodes with instanceTerminationAction DELETE; EC2's spot/instance-action
# in IMDSv2, polled every second here, PBX_PREEMPT_POLL, then the instance
# is terminated).  The node's pbx-preempt sees the notice, drains the node
# and sends the job SIGTERM; pbx-train writes its checkpoint and exits 75,
# its wrapper requeues the job; `pbx cluster start` makes the node again,
# where the task resumes from its checkpoint and completes, with final
# parameters bit-identical to an uninterrupted twin's.  Addresses: the
# slot's $SLOT_NET.1.0/25 and $SLOT_NET.1.128/25 (EC2: /26); SLURM ports
# from BODY_PORT_BASE + 64*8.
case $CLOUD in
gce)
	stop_at_exit sp
	gce_emulator "$SLOT_NET.1.0/25" "$SLOT_NET.1.128/25" --preempt-notice 30
	mkdir -p "$PBX_HOME"
	ssh-keygen -q -t ed25519 -N "" -C t0460 -f "$PBX_HOME/id"
	cloud_account
	cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template sp "$PBX_HOME/id" \
		"autostop: off" "node_groups:" "  - { name: spot, count: 1, machine_type: e2-standard-4, spot: true }")"
	WATCHES="the metadata server" GONE="the Spot instance is gone (instanceTerminationAction DELETE)"
	NOTICE='preemption notice (instance/preempted is TRUE): draining'
	# name_of ROLE: the emulator's instance with label pbx-role ROLE
	name_of() {
		emu_get state | python3 -c 'import json, sys
print(" ".join(i["name"] for i in json.load(sys.stdin)["instances"] if i["labels"].get("pbx-role") == sys.argv[1]))' "$1"
	}
	spot_id() { name_of compute; }
	sp_started() {
		HEAD=$(name_of head)
		[ -n "$HEAD" ]
		ok $? "and a head ($HEAD)"
	}
	sp_watching() {
		conf=$(find "$BODIES" -path '*/etc/pbx/preempt.conf')
		grep -q "^PBX_SPOT='gce'\$" "$conf"
		ok $? "its settings name the cloud"
	}
	sp_preempt() { is "$(gce_preempt "$SPOT")" "compute.instances.preempted" "the emulator preempts the spot node (30 s of notice)"; }
	sp_checkpointed() {
		grep -q '^pbx-train: SIGTERM at step [0-9]*: checkpoint written' "$SPOT_T0/stderr"
		ok $? "pbx-train wrote its checkpoint on SIGTERM"
	}
	sp_gone() {
		is "$(procs_mentioning "$BODIES/pbx-test/us-central1-a/$(printf '%s' "$SPOT" | sha1sum | cut -c1-10)/")" "" \
			"no process of the preempted body is left"
	}
	sp_restarted() {
		sqlite3 "$PBX_HOME/pbx.db" "SELECT detail FROM events WHERE kind = 'node.new-instance'" | grep -q '^spot1: a new instance'
		ok $? "the new instance's host key is pinned afresh (not refused as changed)"
	}
	sp_nothing_left() {
		is "$(emu_get state | json_get 'len(d["instances"])')" "0" "no instance is left"
		is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
	}
	;;
aws)
	H_SUBNET1=$SLOT_NET.1.0/25 H_SUBNET2=$SLOT_NET.1.128/26 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS=sp
	. "$PBX_SOURCE_DIR/tests/cli/aws_lib.sh"
	h_start
	cloud_account
	cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template sp "$PBX_HOME/id" \
		"autostop: off" "head: { machine_type: m5.large }" "node_groups:" \
		"  - { name: spot, count: 1, machine_type: t3.large, spot: true }")"
	export PBX_PREEMPT_POLL=1
	WATCHES=IMDS GONE="the spot instance is terminated"
	NOTICE='preemption notice ({"action": "terminate", "time": "'
	# the running spot instance's id
	spot_id() {
		h_py <<'PY'
print(" ".join(i["InstanceId"] for r in c.describe_instances()["Reservations"] for i in r["Instances"]
               if i.get("InstanceLifecycle") == "spot" and i["State"]["Name"] == "running"))
PY
	}
	sp_started() { :; }
	sp_watching() { :; }
	sp_preempt() { is "$(aws_spot_interrupt "$SPOT")" "terminate" "the harness interrupts the spot instance (terminate in 30 s)"; }
	sp_checkpointed() { :; }
	sp_gone() { :; }
	sp_restarted() { :; }
	sp_nothing_left() { is "$(holds)" "0 0 0" "no instance, security group or key pair is left"; }
	;;
esac
chmod 600 "$PBX_HOME/config.yaml"

test_expect_success 'a cluster with a spot node starts; the node watches for a notice' '
	run_pbx -q cluster start sp
	ok $rc "the cluster starts: $errout"
	SPOT=$(spot_id)
	[ -n "$SPOT" ]
	ok $? "one running spot instance ($SPOT)"
	sp_started
	plog=$(find "$BODIES" -path "*/var/log/pbx-preempt.log" 2>/dev/null)
	is "$(echo "$plog" | grep -c .)" 1 "one node runs pbx-preempt: the spot node"
	wait_for 100 grep -q "watching for a preemption notice ($CLOUD)" "$plog"
	ok $? "it watches $WATCHES: $(cat "$plog" 2>/dev/null)"
	sp_watching
'
test_expect_success 'a pbx-train task trains there' 'spot_train sp'
test_expect_success 'the cloud preempts the node: the task checkpoints and is requeued' '
	sp_preempt
	wait_for 200 grep -q "SIGTERM sent to its batch step" "$plog"
	ok $? "pbx-preempt saw the notice and signalled the job"
	cp "$plog" "$TEST_TMP/preempt.log" 2>/dev/null
	grep -qF "$NOTICE" "$TEST_TMP/preempt.log"
	ok $? "it logged the notice: $(tail -n 3 "$TEST_TMP/preempt.log" | tr "\n" "|")"
	wait_for 300 grep -q "^=== pbx task 0 attempt 1 REQUEUED exit 75 " "$SPOT_T0/stderr"
	ok $? "the task checkpointed, exited 75 and was requeued within the notice"
	sp_checkpointed
'
test_expect_success 'after the notice the instance is gone' '
	i=0
	while [ -n "$(spot_id)" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
	is "$(spot_id)" "" "after the notice $GONE"
	sp_gone
'
test_expect_success 'a start makes the node again, where the task resumes and completes' '
	run_pbx -q cluster start sp
	ok $rc "start makes the spot node again: $errout"
	sp_restarted
	spot_resumed 300
'
test_expect_success 'with the parameters of an uninterrupted twin' 'spot_twin sp'
test_expect_success 'the stop leaves nothing' '
	run_pbx -q cluster stop --discard-results sp
	ok $rc "stop: $errout"
	sp_nothing_left
'
test_done
