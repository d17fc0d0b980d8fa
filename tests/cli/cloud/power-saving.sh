# cloud/power-saving.sh - one body for t0452 (CLOUD=gce) and t0458
# (CLOUD=aws), sourced after lib.sh: SLURM power saving
# (docs/power-saving.md) on the emulators' node bodies.  A group with min:
# 0 and max: 2 starts with the head alone; slurm.conf names the sleeping
# nodes by names the cloud resolves once they exist (Compute Engine: their
# instance names, which its internal DNS knows; EC2: pw-node1 and pw-node2,
# which no DNS knows, written into every node's /etc/hosts block).  A
# 2-task sweep submitted with no pbx running on the user's side makes
# slurmctld run pbx-resume, which runs the head's own pbx (pbx-head: the
# head's identity, key and store), which makes both instances in one call
# (bulkInsert; RunInstances, with the head's own key imported as a second
# key pair of the cluster) and bootstraps them; every task completes on
# them; the head keeps the budget's deadline through its own starts.
# After SuspendTime idle pbx-suspend deletes them (the head stays), also
# after the user's start sent the head a record that has them asleep; a
# job wakes them again (new instances, new addresses, found by name);
# autostop removes the awake nodes before the head stops, and a start and a
# job bring them back; the user's `stop` leaves nothing.  Addresses: the
# slot's $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports from
# BODY_PORT_BASE + 64*8.
# shellcheck disable=SC2154 # rc, out, errout: run_pbx's; the rest set in the steps
case $CLOUD in
gce)
	TYPE=e2-standard-2 UP=RUNNING OFF=TERMINATED PRICES="e2-standard-2: 1"
	# the head of the same priced type
	head_type() { sed -i 's/^    head: { service_account/    head: { machine_type: e2-standard-2, service_account/' "$PBX_HOME/config.yaml"; }
	instances() { emu_instances; }
	AWAKE="head=RUNNING node1=RUNNING node2=RUNNING"
	# node1's line of slurm.conf: its instance's name
	node1_addr() { echo "NodeAddr=$(emu_get state | json_get 'd["instances"][0]["name"]' | sed 's/-head$//')-node1"; }
	# makes: the calls that made instances so far
	makes() { grep -c 'POST /compute/v1/projects/pbx-test/zones/[^/]*/instances/bulkInsert' "$TEST_TMP/emu.log"; }
	MAKES=bulkInsert
	# node_addrs: the addresses of the running node instances, sorted
	node_addrs() { emu_get state | json_get '" ".join(sorted(i["networkIP"] for i in d["instances"] if not i["name"].endswith("-head") and i["status"] == "RUNNING"))'; }
	# node_ids: the ids of the running node instances, sorted
	node_ids() { emu_get state | json_get '" ".join(sorted(i["id"] for i in d["instances"] if not i["name"].endswith("-head") and i["status"] == "RUNNING"))'; }
	# the emulator gives a new instance the lowest free address, which may
	# be the one an instance deleted before had
	new_addrs() { :; }
	start_held() { :; }
	woken_held() { :; }
	named() { :; }
	left() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])'; }
	NOTHING="0 0 0" LEFT="instance, firewall rule or router"
	;;
aws)
	TYPE=t3.large UP=running OFF=stopped PRICES="t3.large: 1, m5.large: 1"
	head_type() { :; }
	instances() { aws_instances pw; }
	AWAKE="head=running node=running node=running"
	node1_addr() { echo "NodeAddr=pw-node1"; }
	makes() { calls calls RunInstances; }
	MAKES=RunInstances
	# "ADDRESS KEYNAME" of each running node instance, sorted by address
	node_instances() {
		h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-role", "Values": ["node"]},
                                       {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]:
    for i in r["Instances"]:
        out.append("%s %s" % (i["PrivateIpAddress"], i["KeyName"]))
print("\n".join(sorted(out)))
PY
	}
	node_addrs() { node_instances | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//'; }
	node_ids() {
		h_py <<'PY'
print(" ".join(sorted(i["InstanceId"] for r in c.describe_instances(Filters=[{"Name": "tag:pbx-role", "Values": ["node"]},
      {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"])))
PY
	}
	new_addrs() {
		[ "$(node_addrs)" != "$addrs1" ]
		ok $? "at new addresses ($addrs1 -> $(node_addrs))"
	}
	start_held() { is "$(holds)" "1 1 1" "one instance, security group and key pair (the user's)"; }
	woken_held() {
		is "$(holds)" "3 1 2" "and imported its own key as the cluster's second key pair"
		is "$(node_instances | awk '{print $2}' | sort -u | grep -c "^pbx-pw-.*-[0-9a-f]\{8\}$")" 1 \
			"both instances hold the head's key pair"
	}
	# The names block of a body's /etc/hosts ("ADDRESS NAME" lines).
	hosts_block() { sed -n '/^# pbx: nodes of cluster pw that sleep (begin)$/,/(end)$/p' "$1" | grep -v '^#'; }
	# named: the head's /etc/hosts block, and every node's, has the
	# running instances' addresses under the names slurm.conf gives
	named() {
		is "$(hosts_block "$head_root/etc/hosts" | awk '{print $1}' | sort | tr '\n' ' ' | sed 's/ $//')" "$(node_addrs)" \
			"the head's /etc/hosts has both instances' addresses"
		is "$(hosts_block "$head_root/etc/hosts" | awk '{print $2}' | tr '\n' ' ')" "pw-node1 pw-node2 " \
			"under the names slurm.conf gives"
		# shellcheck disable=SC2044 # TEST_TMP's paths have no blanks; a pipe would lose the checks
		for f in $(find "$BODIES" -path '*/etc/hosts' ! -path "$head_root/*"); do
			is "$(hosts_block "$f")" "$(hosts_block "$head_root/etc/hosts")" "a node's /etc/hosts has the same block"
		done
	}
	left() { holds; }
	NOTHING="0 0 0" LEFT="instance, security group or key pair, the head's included"
	;;
esac
# suspend_time 40 s: at 20 s, on a loaded machine, EC2's nodes went to
# sleep between the sweep's end and the checks that they are awake
SUSPEND=40
cloud_power_cluster pw "{ name: node, count: 2, min: 0, machine_type: $TYPE, cpus: 2 }" \
	"{ suspend_time: ${SUSPEND}s, resume_timeout: 240s }"
# a budget far from spent: the head keeps its deadline through its own
# starts (power saving), which have no prices (docs/cost.md)
head_type
sed -i "/^    slurm: /a\\    budget: 1000000" "$PBX_HOME/config.yaml"
printf 'prices:\n  hourly: { %s }\n' "$PRICES" >>"$PBX_HOME/config.yaml"
# shellcheck disable=SC2038 # TEST_TMP's paths have no blanks
budget_until() { find "$BODIES" -path '*/etc/pbx/autostop.conf' -exec grep -l "^PBX_ROLE='head'" {} + |
	xargs sed -n "s/^PBX_BUDGET_UNTIL='\([0-9]*\)'\$/\1/p"; }
sinfo_states() { "$PBX" cluster exec pw -- sinfo -h -N -o '%N %t' 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; }
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
show_power_log() { power_log | tail -20 | sed 's/^/#   /'; }
nodes_of() { json_get '" ".join("%s=%s" % (n["name"], n["state"]) for n in d["nodes"])'; }
head_nodes() { "$pbx_head" cluster show pw --json | nodes_of; }
# each body's copy of slurm.conf, its own root made @ROOT@: how many differ
same_confs() {
	# shellcheck disable=SC2044 # TEST_TMP's paths have no blanks
	for f in $(find "$BODIES" -path '*/etc/slurm/slurm.conf'); do
		sed "s#${f%/etc/slurm/slurm.conf}#@ROOT@#g" "$f" | md5sum
	done | sort -u | grep -c .
}
# node1's NodeAddr and State, and the ResumeProgram, of the head's slurm.conf
node1_conf() {
	"$PBX" cluster exec pw -- sh -c 'grep -E "^NodeName=node1 " "$SLURM_CONF" | tr " " "\n" | grep -E "^(NodeAddr|State)="; grep "^ResumeProgram=" "$SLURM_CONF" | sed "s#=/.*/#=#"'
}
ctld_pid() { cat "$head_root/run/slurmctld.pid" 2>/dev/null; }

test_expect_success 'a cluster with min: 0 starts with the head alone' '
	run_pbx -q cluster start pw
	ok $rc "a cluster with min: 0 starts: $errout"
	is "$(instances)" "head=$UP" "only the head'"'"'s instance is made"
	is "$(node_states)" "head:up node1:asleep node2:asleep" "both nodes are asleep"
	is "$(sinfo_states)" "node1 idle~ node2 idle~" "SLURM knows them powered down (idle~)"
	is "$(node1_conf)" "$(node1_addr)
State=CLOUD
ResumeProgram=pbx-resume" "slurm.conf names node1 by a name resolved once it exists"
	head_conf=$(find "$BODIES" -path "*/etc/slurm/slurm.conf" | head -1)
	head_root=${head_conf%/etc/slurm/slurm.conf}
	conf_sum=$(md5sum <"$head_conf")
	ctld0=$(ctld_pid)
	pbx_head=$(find "$BODIES" -path "*/usr/local/sbin/pbx-head" | head -1)
	[ -x "$pbx_head" ]
	ok $? "the head runs pbx of its own (pbx-head)"
	start_held
	makes0=$(makes)
	until0=$(budget_until)
	[ "${until0:-0}" -gt "$(date +%s)" ]
	ok $? "the user'"'"'s start gave the head the budget'"'"'s deadline: $until0"
'
test_expect_success 'a sweep wakes both nodes through SLURM and the head'"'"'s pbx' '
	mkdir -p "$TEST_TMP/exp"
	printf "%s\n" "name: wake" "command: \"sleep 1 && echo done {i}\"" "sweep: { grid: { i: [1, 2] } }" >"$TEST_TMP/exp/e.yaml"
	run_pbx parrun "$TEST_TMP/exp/e.yaml" pw --cpus-per-task=2
	ok $rc "2 tasks of 2 CPUs submitted: $errout"
	pkg=$(echo "$out" | sed -n "s/^package \([0-9a-f]*\) .*/\1/p")
	# from here no pbx runs on the user'"'"'s side until the tasks are done:
	# slurmctld runs pbx-resume, which runs pbx-head
	wait_for 3000 queue_empty pw
	ok $? "the queue empties with no pbx running here"
	wait_final "$pkg" 60
	is "$(task_states "$pkg")" "COMPLETED COMPLETED" "both tasks completed on the nodes the head made"
	is "$(task_nodes "$pkg")" "node1 node2" "one on each node (2 CPUs a task, 2 a node)"
	[ "$(task_states "$pkg")" = "COMPLETED COMPLETED" ] || show_power_log
	is "$(instances)" "$AWAKE" "the head made both instances"
	is "$(($(makes) - makes0))" 1 "in one $MAKES"
	woken_held
	named
	addrs1=$(node_addrs) ids1=$(node_ids)
	is "$(budget_until)" "$until0" "the head'"'"'s own start kept the budget'"'"'s deadline the user'"'"'s start computed"
	is "$(head_nodes)" "head=up node1=up node2=up" "the head'"'"'s store has them up"
	is "$(power_log | grep -c " resume node\[1-2\]\$")" 1 "pbx-power.log has one resume of node[1-2]"
	# slurm.conf never changes as nodes wake: the head'"'"'s start renders
	# the user'"'"'s, and slurmctld goes on
	is "$(md5sum <"$head_conf")" "$conf_sum" "the head'"'"'s slurm.conf is the one the user'"'"'s start wrote"
	is "$(same_confs)" 1 "and the nodes the head made have the same"
	is "$(ctld_pid)" "$ctld0" "slurmctld was not restarted"
'
# the user's start (a repair) while they are awake: the user's store has
# them asleep, and so has the record it sends the head, but the head keeps
# what it knows of its awake nodes (else it would never remove them)
test_expect_success 'the user'"'"'s start while they are awake leaves them alone' '
	run_pbx -q cluster start pw
	ok $rc "the user'"'"'s start while the head'"'"'s nodes are awake: $errout"
	is "$(instances)" "$AWAKE" "leaves the head'"'"'s instances alone"
	is "$(head_nodes)" "head=up node1=up node2=up" "and the head'"'"'s store has them up still"
'
test_expect_success 'idle for suspend_time, the head deletes them' '
	asleep() { [ "$(instances)" = "head=$UP" ]; }
	wait_for 1800 asleep
	ok $? "after $SUSPEND s idle the head deleted both instances: $(instances)"
	[ "$(instances)" = "head=$UP" ] || show_power_log
	# pbx-suspend records them asleep after the deletes the cloud shows
	# (under load, a moment later): wait for it, with a bound
	wait_secs 60 prints "head=up node1=asleep node2=asleep" head_nodes
	is "$(head_nodes)" "head=up node1=asleep node2=asleep" "the head'"'"'s store has them asleep"
	wait_for 900 prints "node1 idle~ node2 idle~" sinfo_states
	is "$(sinfo_states)" "node1 idle~ node2 idle~" "SLURM has them powered down"
'
test_expect_success 'a job wakes them again: new instances, found by name' '
	run_pbx cluster exec pw -- srun -N2 -c2 hostname
	ok $rc "srun wakes both nodes again and runs on them: $out $errout"
	[ $rc = 0 ] || show_power_log
	is "$(instances)" "$AWAKE" "made anew"
	ids2=$(node_ids)
	[ -n "$ids2" ] && [ -z "$(echo "$ids1 $ids2" | tr " " "\n" | sort | uniq -d)" ]
	ok $? "as new instances ($ids1 -> $ids2)"
	new_addrs
	named
'
# autostop with nodes awake: the head removes them first (as a suspend
# does: deleted, not left stopped with their disks), then stops itself; a
# start brings the head back and a job wakes the nodes again
test_expect_success 'autostop removes the awake nodes before the head stops' '
	export PBX_AUTOSTOP_TICK=1
	run_pbx -q cluster start pw --autostop 10s
	ok $rc "a start sets autostop 10s: $errout"
	stopped() { [ "$(instances)" = "head=$OFF" ]; }
	wait_for 1200 stopped
	ok $? "idle for 10 s, the head deleted the nodes and stopped itself: $(instances)"
	[ "$(instances)" = "head=$OFF" ] || find "$BODIES" -name "pbx-autostop.log" -exec tail -5 {} + | sed "s/^/#   /"
	run_pbx -q cluster start pw --autostop off
	ok $rc "start brings the head back: $errout"
	run_pbx cluster exec pw -- srun -N2 -c2 hostname
	ok $rc "a job wakes both nodes again: $out $errout"
	[ $rc = 0 ] || show_power_log
'
test_expect_success 'the user'"'"'s stop leaves nothing' '
	run_pbx cluster stop --discard-results pw
	ok $rc "the user'"'"'s stop: $errout"
	is "$(left)" "$NOTHING" "no $LEFT is left, the nodes the head made included"
	# the harness ends a terminated instance'"'"'s body on its next look (0.2 s)
	wait_for 300 prints "" procs_mentioning "$BODIES/"
	is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
'
test_done
