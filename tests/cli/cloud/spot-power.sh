# cloud/spot-power.sh - one body for t0463 (CLOUD=gce) and t0466
# (CLOUD=aws), sourced after lib.sh: a preempted Spot node that SLURM's
# power saving makes comes back by itself (docs/spot.md,
# docs/power-saving.md), on the emulators' node bodies.  A Spot group with
# min: 0 starts with the head alone; a pbx-train task wakes node1
# (pbx-resume on the head, which runs pbx-head as the head's service
# account or instance profile); the cloud preempts it (30 s of notice,
# then it deletes or terminates the instance).  node1's pbx-preempt marks
# it POWER_DOWN_ASAP, not only drained, and sends the job SIGTERM;
# pbx-train checkpoints and exits 75, the wrapper requeues the job;
# slurmctld runs pbx-suspend (on Compute Engine its DELETE is refused with
# resourceNotReady until the cloud's own deletion ends, and asked again);
# the requeued job wakes node1 again, a new instance (on EC2 at a new
# address every node learns through its /etc/hosts block), where the task
# resumes and completes on attempt 2, with final parameters bit-identical
# to an uninterrupted twin's: no pbx ran on the user's side but to read
# the state.  Addresses: the slot's $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24;
# SLURM ports from BODY_PORT_BASE + 64*8.
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
case $CLOUD in
gce)
	cloud_power_cluster sq "{ name: spot, count: 1, min: 0, machine_type: e2-standard-2, cpus: 2, spot: true }" \
		"{ suspend_time: 300s, resume_timeout: 240s }" --preempt-notice 30
	# sp_node1 [id|name]: node1's instance (none while it sleeps)
	sp_node1() {
		emu_get state | json_get '" ".join(i["'"${1:-id}"'"] for i in d["instances"] if i["labels"].get("pbx-role") == "compute")'
	}
	sp_preempt() {
		NODE=$(sp_node1 name)
		is "$(gce_preempt "$NODE")" "compute.instances.preempted" "the emulator preempts node1 ($NODE; 30 s of notice)"
	}
	sp_suspended() {
		refused=$(grep -c "\"DELETE /compute/v1/projects/pbx-test/zones/us-central1-a/instances/$NODE?[^ ]* HTTP/1.1\" 400" "$TEST_TMP/emu.log")
		[ "$refused" -ge 1 ]
		ok $? "the suspend's DELETE during the notice was refused ($refused times: resourceNotReady)"
		power_log | grep -q 'resourceNotReady' && r=1 || r=0
		ok "$r" "and asked again until the instance was gone: the suspend did not fail"
	}
	sp_nothing_left() { is "$(emu_get state | json_get 'len(d["instances"])')" "0" "no instance is left"; }
	;;
aws)
	H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS="sq"
	. "$PBX_SOURCE_DIR/tests/cli/aws_lib.sh"
	h_start
	aws_power_cluster sq "{ name: spot, count: 1, min: 0, machine_type: t3.large, cpus: 2, spot: true }" \
		"{ suspend_time: 300s, resume_timeout: 240s }"
	# sp_node1: "ID@ADDRESS" of node1's instance (none while it sleeps)
	sp_node1() { aws_spot_instances; }
	sp_preempt() { is "$(aws_spot_interrupt "${ID1%@*}")" "terminate" "the harness interrupts node1 (terminate in 30 s)"; }
	sp_suspended() {
		power_log | grep -q 'error' && r=1 || r=0
		ok $r "no power action failed: $(power_log | grep error | head -n 2)"
	}
	sp_nothing_left() { is "$(holds)" "0 0 0" "no instance, security group or key pair is left, the head's included"; }
	;;
esac

test_expect_success 'a Spot group with min: 0 starts with the head alone' '
	run_pbx -q cluster start sq
	ok $rc "start: $errout"
	is "$(node_states)" "head:up spot1:asleep" "only the head is made"
'
test_expect_success 'a pbx-train task wakes node1, whose pbx-preempt watches' '
	spot_train sq
	ID1=$(sp_node1)
	[ -n "$ID1" ]
	ok $? "the head made node1'"'"'s instance ($ID1)"
	spot_watching $CLOUD "the woken node"
'
test_expect_success 'the cloud preempts node1: the job is signalled and requeued' '
	sp_preempt
	spot_power_notice "$plog"
'
# from here nothing on the user's side but reading: slurmctld suspends
# node1 (its instance is gone) and wakes it again for the requeued job
test_expect_success 'SLURM suspends node1 and wakes it again by itself' '
	spot_power_back sq
	sp_suspended
'
test_expect_success 'the task resumes on a new instance and completes' '
	spot_resumed 60
	ID2=$(sp_node1)
	[ -n "$ID2" ] && [ "${ID2%@*}" != "${ID1%@*}" ]
	ok $? "on a new instance of node1 ($ID1, then $ID2)"
'
test_expect_success 'with the parameters of an uninterrupted twin' 'spot_twin sq'
test_expect_success 'the stop leaves nothing' '
	run_pbx -q cluster stop --discard-results sq
	ok $rc "stop: $errout"
	sp_nothing_left
	wait_for 300 prints "" procs_mentioning "$BODIES/"
	is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
'
test_done
