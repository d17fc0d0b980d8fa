# shellcheck shell=sh
# cloud/power-view.sh - one body for t0457 (CLOUD=gce) and t0461
# (CLOUD=aws), sourced after lib.sh: the user's view of a power-saving
# cluster on the emulators' node bodies (issue 19; docs/power-saving.md,
# "The laptop's view" and "On EC2").  The head's own pbx makes and
# deletes (terminates) the nodes with no pbx running on the user's side,
# so the user's store has them asleep; `cluster show` (and --json) lists
# the cluster's instances once and learns which run, at which addresses
# (Compute Engine: by label, and `state` and `cluster exec -n` learn it
# too; EC2: from one DescribeInstances, the one RunInstances that makes
# both naming each instance's node by pbx-role and pbx-launch, read with
# each instance's amiLaunchIndex, src/cloud/aws/launch.c, with no
# CreateTags); the user's spend of a node is the head's runs, from when
# the cloud made its instance; the user's key is authorized on the nodes
# (the record the user's start sends the head carries it), so `exec -n`
# reaches a woken node; a node's host-key pins stay while its instance's
# uid (Compute Engine: its numeric id; EC2: its instance id) stays the
# same; once the head has deleted them, show has them asleep again; the
# user's `stop` leaves nothing.  Then what only one cloud has (functions
# at the top): on Compute Engine a list that fails leaves the verb working
# on what the store knew, with a warning, a start learns the nodes sleep,
# and the pins are forgotten when the head makes a node anew under the
# same name; on EC2 `cluster ssh` reaches a node, both nodes authorize the
# user's key tagged pbx-user:pv, an instance whose tags name no node (its
# launch tag removed) is not learnt, and the head's next start tags it
# (pbx-node, one CreateTags).  Addresses: the slot's $SLOT_NET.1.0/24 and
# $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE + 64*8.
# shellcheck disable=SC2154 # rc, out, errout: run_pbx's; the rest set below
# shellcheck disable=SC2016 # sh -c '...': the node's shell expands it
case $CLOUD in
gce)
	WHAT="a Compute Engine cluster" TYPE=e2-standard-2 SUSPEND=30 UP=RUNNING GONE=deleted
	AWAKE="head=RUNNING node1=RUNNING node2=RUNNING"
	instances() { emu_instances; }
	# cloud_addrs: "NODE=ADDRESS/PUBLIC/INSTANCE ..." of the emulator's
	# running node instances
	cloud_addrs() { emu_get state | json_get '" ".join(sorted("%s=%s/%s/%s" % (i["name"].rsplit("-", 1)[-1], i["networkIP"], i["natIP"], i["name"]) for i in d["instances"] if not i["name"].endswith("-head") and i["status"] == "RUNNING"))'; }
	# list_calls: how many instance lists the user's pbx sent (its store's
	# request log; the head's pbx lists too)
	list_calls() { sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM events WHERE kind = 'http' AND detail LIKE '%GET %/aggregated/instances?%'"; }
	LIST="one list of the cloud"
	# uid_of NODE: the numeric id of NODE's instance in the emulator
	uid_of() { emu_get state | json_get '"".join(i["id"] for i in d["instances"] if i["name"].endswith("-'"$1"'"))'; }
	UIDS="numeric id, which Compute Engine gives no other instance"
	left() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])'; }
	LEFT="no instance, firewall rule or router is left"
	# the start recorded the head's uid
	as_started() {
		uid=$(uid_of head)
		[ -n "$uid" ] && [ "$(node_uid head)" = "$uid" ]
		ok $? "the start recorded the head's instance's numeric id as its uid ($(node_uid head) = $uid)"
	}
	# a sweep wakes both nodes through SLURM and the head's pbx, with no
	# pbx running here (queue_empty: exec on the head, which lists
	# nothing); state learns they are up
	wake() {
		mkdir -p "$TEST_TMP/exp"
		printf '%s\n' "name: view" 'command: "sleep 1 && echo done {i}"' "sweep: { grid: { i: [1, 2] } }" >"$TEST_TMP/exp/e.yaml"
		run_pbx parrun "$TEST_TMP/exp/e.yaml" pv --cpus-per-task=2
		ok "$rc" "2 tasks of 2 CPUs submitted: $errout"
		pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
		calls0=$(list_calls)
		wait_for 3000 queue_empty pv
		ok $? "the queue empties with no pbx running here"
		[ "$(instances)" = "$AWAKE" ] || show_power_log
		is "$(instances)" "$AWAKE" "the head made both instances"
		is "$(node_states)" "head:up node1:asleep node2:asleep" "the user's store still has them asleep"
		is "$(($(list_calls) - calls0))" 0 "exec on the head lists no instance"

		calls0=$(list_calls)
		run_pbx state "$pkg"
		ok "$rc" "state: $errout"
		is "$(($(list_calls) - calls0))" 1 "state lists the instances once"
		is "$(node_states)" "head:up node1:up node2:up" "state learnt both are up"
		# its spend of them is the head's runs (state reached the head):
		# from when the head made their instances, not now
		s1=$(emu_created node1)
		near "$(run_start node1)" "$s1" && near "$(run_start node2)" "$(emu_created node2)"
		ok $? "the user's spend of both begins when their instances were made ($(run_start node1), $s1), before state learnt them ($(date +%s))"
		is "$(task_states "$pkg")" "COMPLETED COMPLETED" "both tasks completed on them"
	}
	# show's table too
	as_shown() {
		as_if_unseen asleep
		run_pbx cluster show pv
		addr=$(emu_get state | json_get '[i["networkIP"] for i in d["instances"] if i["name"].endswith("-node1")][0]')
		case $out in *"node1 "*"$addr:"*) r=0 ;; *) r=1 ;; esac
		ok $r "show's table has node1 at its instance's address ($addr): $out"
	}
	# a root the store has wrong (an instance the head made anew has a
	# new body, which the user's pbx learns only when it lists): the
	# body's sshd names its root, which sudo (the login user is not root)
	# passes on; node2 authorizes the user's key (the head put it in its
	# ssh-keys)
	as_reached() {
		root1=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT root FROM nodes WHERE name = 'node1'")
		sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET root = '/nonexistent/old-body' WHERE name = 'node1'"
		run_pbx cluster exec -n node1 pv -- sh -c 'echo "$PBX_NODE"'
		is "$rc:$out" "0:node1" "exec -n node1 sources its own env.sh when the store's root is stale: $errout"
		sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET root = '$root1' WHERE name = 'node1'"
		run_pbx cluster exec -n node2 pv -- sh -c 'cat "$PBX_ROOT/etc/ssh/keys/pbx"'
		case $out in *"$key"*) r=0 ;; *) r=1 ;; esac
		ok $r "node2 authorizes the user's key: $rc $errout"
	}
	# a list that fails: the verb goes on with what the store knows, and
	# says so
	as_pinned() {
		emu_post faults '{"unavailable": 1.0}' >/dev/null
		run_pbx cluster show --json pv
		emu_post faults '{"unavailable": 0.0}' >/dev/null
		ok "$rc" "show works while the cloud cannot be listed: $errout"
		case $errout in *"warning: cannot list cluster pv's instances"*) r=0 ;; *) r=1 ;; esac
		ok $r "  and warns that it could not list ($errout)"
		is "$(echo "$out" | nodes_of)" "head=up node1=up node2=up" "  showing what the store knew"
	}
	# state learns they sleep
	as_asleep() {
		is "$(node_states)" "head:up node1:up node2:up" "the user's store had them up"
		as_if_unseen up
		run_pbx state "$pkg"
		ok "$rc" "state: $errout"
		is "$(node_states)" "head:up node1:asleep node2:asleep" "state learnt they are asleep"
	}
	# the user's start (a repair) with a store that has them up: it learns
	# they sleep, and does not make them again; then the head makes node1
	# anew (a job wakes it): the same name, a new numeric id, a new host
	# key; its old pins are forgotten and the new key taken
	as_slept() {
		as_if_unseen up
		run_pbx -q cluster start pv
		ok "$rc" "the user's start with the store's nodes up: $errout"
		is "$(instances)" "head=$UP" "  makes no node the head had deleted"
		is "$(node_states)" "head:up node1:asleep node2:asleep" "  and records them asleep"

		keys1=$(node_pin_keys pv node1)
		run_pbx cluster exec pv -- srun -w node1 -c2 hostname
		ok "$rc" "a job wakes node1 again: $errout"
		[ "$rc" = 0 ] || show_power_log
		uid2=$(uid_of node1)
		[ -n "$uid2" ] && [ "$uid2" != "$uid1" ] && [ -n "$keys1" ]
		ok $? "  as a new instance ($uid1, then $uid2), whose pins the store had ($keys1)"
		run_pbx cluster exec -n node1 pv -- sh -c 'echo "$PBX_NODE"'
		is "$rc:$out" "0:node1" "exec -n node1 reaches the new instance: $errout"
		keys2=$(node_pin_keys pv node1)
		[ -n "$keys2" ] && [ "$keys2" != "$keys1" ] && [ "$(node_uid node1)" = "$uid2" ]
		ok $? "  having forgotten the old pins and pinned its new key ($keys2), under its new uid ($(node_uid node1))"
	}
	;;
aws)
	WHAT="an EC2 cluster" TYPE=t3.large SUSPEND=90 UP=running GONE=terminated
	AWAKE="head=running node=running node=running"   # by their pbx-role tags
	instances() { aws_instances pv; }
	# cloud_addrs: "NODE=ADDRESS/PUBLIC/INSTANCE ..." of the running node
	# instances, NODE from the node their tags name (node_of, aws_lib.sh;
	# "?" when none)
	cloud_addrs() {
		h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-role", "Values": ["node"]},
                                       {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]:
    for i in r["Instances"]:
        out.append("%s=%s/%s/%s" % (node_of(i), i["PrivateIpAddress"], i.get("PublicIpAddress"), i["InstanceId"]))
print(" ".join(sorted(out)))
PY
	}
	list_calls() { calls calls DescribeInstances; }
	LIST="one DescribeInstances"
	# uid_of NODE: the id of NODE's running instance (by its tags)
	uid_of() { cloud_addrs | tr ' ' '\n' | sed -n "s|^$1=.*/||p"; }
	UIDS="id, which EC2 never reuses"
	left() { holds; }
	LEFT="no instance, security group or key pair is left, the head's included"
	# the nodes each instance's tags name
	tagged() { cloud_addrs | tr ' ' '\n' | cut -d= -f1 | tr '\n' ' '; }
	as_started() { :; }
	# a job wakes both nodes through SLURM and the head's pbx, with no
	# pbx running here (exec's SSH session on the head waits for srun)
	wake() {
		tags0=$(calls calls CreateTags) runs0=$(calls calls RunInstances)
		run_pbx cluster exec pv -- srun -N2 -c2 hostname
		ok "$rc" "srun -N2 wakes both nodes and runs on them: $errout"
		[ "$rc" = 0 ] || show_power_log
		is "$(instances)" "$AWAKE" "the head made both instances"
		is "$(node_states)" "head:up node1:asleep node2:asleep" "the user's store still has them asleep"
		is "$(($(calls calls RunInstances) - runs0))" 1 "  with one RunInstances"
		is "$(tagged)" "node1 node2 " "its tags name each instance's node (pbx-launch, by launch index)"
		is "$(($(calls calls CreateTags) - tags0))" 0 "  with no CreateTags"
	}
	# the user's spend of them is the head's runs (show reached the
	# head): from their instances' launchTime, within 2 s
	launched() {
		h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-role", "Values": ["node"]},
                                       {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]:
    for i in r["Instances"]:
        out.append("%s=%d" % (node_of(i), int(i["LaunchTime"].timestamp())))
print(" ".join(sorted(out)))
PY
	}
	launched_at() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
	as_shown() {
		l=$(launched)
		near "$(run_start node1)" "$(launched_at "$l" node1)" && near "$(run_start node2)" "$(launched_at "$l" node2)"
		ok $? "  and the user's spend of them is the head's runs, from their instances' launchTime ($(run_start node1) $(run_start node2); $l)"
	}
	# exec -n node2 too: their key pair is the head's, and the head's
	# bootstrap authorized the user's key
	as_reached() {
		run_pbx cluster exec -n node2 pv -- sh -c 'echo "$PBX_NODE"'
		is "$rc:$out" "0:node2" "exec -n node2 too: $errout"
	}
	# `cluster ssh NAME NODE` (OpenSSH, with the keys pbx pinned); an
	# instance whose tags name no node (its launch tag removed) is not
	# learnt, and the head's next start (a resume checks every node that
	# is up) tags it
	as_pinned() {
		as_if_unseen asleep
		run_pbx cluster ssh pv node2 -- sh -c 'echo "$PBX_NODE"'
		is "$rc:$(node_states)" "0:head:up node1:up node2:up" "cluster ssh pv node2 learns node2 up and reaches it: $errout"
		n=0
		# shellcheck disable=SC2044 # TEST_TMP's paths have no blanks
		for f in $(find "$BODIES" -path '*/.ssh/authorized_keys' ! -path "$head_root/*"); do
			grep -q "^$key pbx-user:pv\$" "$f" && n=$((n + 1))
		done
		is "$n" 2 "both nodes authorize the user's key, tagged pbx-user:pv"

		h_py "$(uid_of node2)" <<'PY'
c.delete_tags(Resources=[sys.argv[1]], Tags=[{"Key": "pbx-launch"}])
PY
		as_if_unseen asleep
		is "$(shown)" "head=up node1=up node2=asleep" "an untagged instance is not learnt"
		is "$(instances)" "$AWAKE" "  and nothing is removed"
		pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
		tags0=$(calls calls CreateTags)
		out=$("$pbx_head" -q cluster start pv 2>&1)
		ok $? "a start by the head's pbx: $out"
		is "$(($(calls calls CreateTags) - tags0))" 1 "  tags node2's instance (one CreateTags), not node1's again"
		is "$(tagged)" "node1 node2 " "  so each instance carries its node's name again"
		is "$(shown)" "head=up node1=up node2=up" "  and show learns node2 up again"
	}
	as_asleep() { :; }
	as_slept() { :; }
	;;
*) bail_out "CLOUD is gce or aws, not '$CLOUD'" ;;
esac
cloud_power_cluster pv "{ name: node, count: 2, min: 0, machine_type: $TYPE, cpus: 2 }" \
	"{ suspend_time: ${SUSPEND}s, resume_timeout: 240s }"
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
show_power_log() { power_log | tail -20 | sed 's/^/#   /'; }
nodes_of() { json_get '" ".join("%s=%s" % (n["name"], n["state"]) for n in d["nodes"])'; }
# shown: "NODE=STATE ..." as the user's `cluster show --json` has them
shown() { "$PBX" cluster show --json pv 2>/dev/null | nodes_of; }
# shown_addrs: "NODE=ADDRESS/PUBLIC/INSTANCE ..." of the compute nodes
# there (cloud_addrs: the same of the cloud's running node instances)
shown_addrs() { "$PBX" cluster show --json pv 2>/dev/null | json_get '" ".join("%s=%s/%s/%s" % (n["name"], n["address"], n["public_address"], n["instance_id"]) for n in d["nodes"] if n["role"] == "compute")'; }
run_start() { sqlite3 "$PBX_HOME/pbx.db" "SELECT min(started) FROM node_runs WHERE node = '$1'"; }
# as_if_unseen STATE: the user's store has both nodes in STATE, as if no
# verb had learnt otherwise since the start
as_if_unseen() { sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET state = '$1' WHERE name IN ('node1', 'node2')"; }

run_pbx -q cluster start pv
ok "$rc" "$WHAT with min: 0 starts: $errout"
is "$(instances)" "head=$UP" "only the head's instance is made"
is "$(shown)" "head=up node1=asleep node2=asleep" "show has both nodes asleep"
as_started
run_pbx cluster record pv
key=$(cut -d' ' -f1,2 "$PBX_HOME/id.pub")
case $out in *"$key"*) r=0 ;; *) r=1 ;; esac
ok $r "the record the user's start sends the head carries the user's public key"
head_conf=$(find "$BODIES" -path '*/etc/slurm/slurm.conf' | head -1)
head_root=${head_conf%/etc/slurm/slurm.conf}

wake

# show (and --json) learns they are up, at their instances' addresses,
# from one list of the cloud
as_if_unseen asleep
calls0=$(list_calls)
is "$(shown)" "head=up node1=up node2=up" "show --json lists them up"
is "$(($(list_calls) - calls0))" 1 "  with $LIST"
is "$(node_states)" "head:up node1:up node2:up" "  and the user's store has them up"
is "$(shown_addrs)" "$(cloud_addrs)" "  at their instances' addresses"
as_shown

# exec -n from here reaches them with the user's key (the head authorized
# it)
as_if_unseen asleep
run_pbx cluster exec -n node1 pv -- sh -c 'echo "$PBX_NODE"'
is "$rc:$out" "0:node1" "exec -n node1 runs on the woken node with the user's key: $errout"
as_reached
# the list finds the same instance (its uid), so the pins stay, and a
# changed key is refused
uid1=$(uid_of node1)
[ -n "$uid1" ] && [ "$(node_uid node1)" = "$uid1" ]
ok $? "the store has node1's instance's $UIDS, as its uid ($(node_uid node1) = $uid1)"
view_keeps_pins pv node1
as_pinned

# idle for suspend_time: the head deletes them; the user's verbs learn it
asleep() { [ "$(instances)" = "head=$UP" ]; }
wait_for 1800 asleep
ok $? "after $SUSPEND s idle the head $GONE both instances: $(instances)"
[ "$(instances)" = "head=$UP" ] || show_power_log
as_asleep
as_if_unseen up
is "$(shown)" "head=up node1=asleep node2=asleep" "show has them asleep again"
is "$(node_states)" "head:up node1:asleep node2:asleep" "  and so has the user's store"
as_if_unseen up
run_pbx cluster exec -n node1 pv -- hostname
[ "$rc" != 0 ]
ok $? "exec -n on a sleeping node fails ($rc)"
is "$(node_states)" "head:up node1:asleep node2:asleep" "  having learnt it sleeps"
as_slept

run_pbx cluster stop --discard-results pv
ok "$rc" "the user's stop: $errout"
is "$(left)" "0 0 0" "$LEFT"
# the harness ends a terminated instance's body on its next look (0.2 s)
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
