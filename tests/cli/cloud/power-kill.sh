# cloud/power-kill.sh - one body for t0454 (CLOUD=gce) and t0459
# (CLOUD=aws), sourced after lib.sh: the head's resume program killed with
# SIGKILL (docs/power-saving.md) at four points: node1 marked waking
# before anything is asked (power:1), its instance asked for but not yet
# recorded (create:1), made but not bootstrapped (start:1), bootstrapped
# before SLURM sees it (start:2).  Each time the next resume goes on with
# one instance of node1 (the one a killed resume asked for is taken, not
# made twice) and node1 runs a job.  Then what only one cloud has (pk_more:
# on Compute Engine a suspend during a resume waits for it, one power
# action at a time; on EC2, with the head's subnet out of capacity, a
# resume makes node1 in the next subnet of clouds.aws.subnets, where a job
# finds it by name).  A resume killed at create:1 leaves node1's instance
# running while SLURM has node1 asleep: an idle stop of the head removes
# it too.  Last, a resume killed at create:1 and then the user's `stop`,
# whose store never heard of the instance (nor, on EC2, of the head's key
# pair): it is found by the cluster's labels or tags, and nothing is left.
# PBX_TEST_KILL_AT (src/util/testkill.h) raises SIGKILL in pbx itself, as
# `kill -9` would.  Addresses: the slot's $SLOT_NET.1.0/24 and
# $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE + 64*8 (below Linux's
# ephemeral ports, 32768 up: a port there may be any connection's).
case $CLOUD in
gce)
	cloud_power_cluster pk "{ name: node, count: 1, min: 0, machine_type: e2-standard-2, cpus: 2 }" \
		"{ suspend_time: 1h, resume_timeout: 240s }"
	instances() { emu_instances; }
	UP=RUNNING OFF=TERMINATED PK_NODE1="node1="
	# SLURM runs its programs as it sees fit: a suspend of node1 while a
	# resume makes it waits for the resume (one power action at a time),
	# and then removes the node; without the wait it would see no instance
	# yet and leave the resume's running, unrecorded as awake
	pk_more() {
		"$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/r.out" 2>&1 &
		resume_pid=$!
		making() { case $(pk_node1_state pk) in waking | creating | running | bootstrapping) return 0 ;; esac; return 1; }
		wait_for 300 making
		ok $? "a resume of node1 is under way: $(pk_node1_state pk)"
		"$pbx_head" -q cluster power pk suspend node1 >"$TEST_TMP/k.out" 2>&1
		ok $? "a suspend of node1 meanwhile: $(cat "$TEST_TMP/k.out")"
		wait $resume_pid
		ok $? "the resume ended well: $(cat "$TEST_TMP/r.out")"
		is "$(pk_node1_state pk):$(instances)" "asleep:head=RUNNING" "the suspend came second: node1 asleep, no instance"
	}
	pk_more_name='a suspend during a resume waits for it'
	pk_nothing_left() {
		is "$(emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])')" "0 0 0" \
			"no instance (node1's, which the user's store never knew, included), firewall rule or router is left"
	}
	;;
aws)
	H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS="pk"
	. "$PBX_SOURCE_DIR/tests/cli/aws_lib.sh"
	h_start
	sed -i "s#subnet: $SUB1 }#subnet: $SUB1, subnets: [$SUB1, $SUB2] }#" "$PBX_HOME/config.yaml"
	aws_power_cluster pk "{ name: node, count: 1, min: 0, machine_type: t3.large, cpus: 2 }" \
		"{ suspend_time: 1h, resume_timeout: 240s }"
	instances() { aws_instances pk; }
	UP=running OFF=stopped PK_NODE1="node="
	# the head's subnet out of capacity: the resume's RunInstances goes to
	# the next subnet, and the head finds node1 there by name
	capacity() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "_harness/capacity", data=sys.argv[2].encode())).read().decode())' "$URL" "$1"; }
	node_subnet() {
		h_py <<'PY'
print(" ".join(i["SubnetId"] for r in c.describe_instances(Filters=[{"Name": "tag:pbx-role", "Values": ["node"]},
      {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]))
PY
	}
	pk_more() {
		is "$(holds)" "1 1 2" "the head's instance, the group, and the user's and the head's key pairs"
		capacity "[\"$SLOT_NET.1.0/24\"]" >/dev/null
		"$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
		ok $? "with the first subnet out of capacity node1 wakes: $(cat "$TEST_TMP/k.out")"
		capacity '[]' >/dev/null
		is "$(node_subnet):$(calls faults InsufficientInstanceCapacity)" "$SUB2:1" "in the second subnet, after one capacity error"
		run_pbx cluster exec pk -- srun -N1 -w node1 -c2 hostname
		ok $rc "a job runs on node1 there: $errout"
		"$pbx_head" -q cluster power pk suspend node1 >"$TEST_TMP/k.out" 2>&1
		ok $? "node1 sleeps again: $(cat "$TEST_TMP/k.out")"
	}
	pk_more_name='with the first subnet out of capacity, node1 wakes in the next'
	pk_nothing_left() {
		is "$(holds)" "0 0 0" "no instance (node1's, which the user's store never knew, included), group or key pair is left"
	}
	;;
esac
PK_ASLEEP="head=$UP" PK_AWAKE="head=$UP ${PK_NODE1}$UP"

test_expect_success 'a cluster with min: 0 starts with the head alone' '
	run_pbx -q cluster start pk
	ok $rc "start: $errout"
	is "$(instances)" "head=$UP" "only the head runs"
	pbx_head=$(find "$BODIES" -path "*/usr/local/sbin/pbx-head" | head -1)
	[ -n "$pbx_head" ]
'
for at in power:1:waking:no create:1:creating:yes start:1:running:yes start:2:bootstrapping:yes; do
	pk_made=${at##*:} pk_at=${at%:*}
	pk_state=${pk_at##*:} pk_point=${pk_at%:*}
	test_expect_success "a resume killed at $pk_point leaves node1 $pk_state; the next goes on" \
		'power_kill_at pk "$pk_point" "$pk_state" "$pk_made"'
done
test_expect_success "$pk_more_name" 'pk_more'
test_expect_success 'an idle stop of the head removes a stray resume'"'"'s instance' \
	'stray_resume_idle_stop pk "head=$UP ${PK_NODE1}$UP" "head=$OFF"'
test_expect_success 'the user'"'"'s stop finds what a last killed resume made: nothing is left' '
	run_pbx -q cluster start pk
	ok $rc "the user'"'"'s start brings the head back: $errout"
	PBX_TEST_KILL_AT=create:1 "$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
	is "$?" "137" "a last resume killed at create:1"
	run_pbx -q cluster stop --discard-results pk
	ok $rc "the user'"'"'s stop: $errout"
	pk_nothing_left
	wait_for 300 prints "" procs_mentioning "$BODIES/"
	is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
'
test_done
