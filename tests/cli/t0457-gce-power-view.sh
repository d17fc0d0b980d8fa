#!/bin/sh
# t0457-gce-power-view.sh - the user's view of a power-saving cluster on
# Compute Engine (the emulator's node bodies; issue 19; docs/power-saving.md,
# "The laptop's view"): the head's own pbx makes and deletes the nodes with
# no pbx running on the user's side, so the user's store has them asleep;
# `cluster show` (and --json), `state` and `cluster exec -n` list the
# cluster's instances by label once and learn which run, at which
# addresses, and the user's key is authorized on them (the record the
# user's start sends the head carries it), so `exec -n` reaches a woken
# node; once the head has deleted them, show has them asleep again; a list
# that fails leaves the verb working on what the store knew, with a
# warning; a start learns it too; a node's host-key pins stay while its
# instance's numeric id (its uid) stays the same, and are forgotten when
# the head makes it anew under the same name; the user's `stop` leaves
# nothing.  Emulator addresses
# 127.0.123.0/24 (private) and 127.0.124.0/24 (public); SLURM ports from
# 28000.
. "$(dirname "$0")/lib.sh"

gce_power_cluster pv 127.0.123.0/24 127.0.124.0/24 28000 "{ name: node, count: 2, min: 0, machine_type: e2-standard-2, cpus: 2 }" \
	"slurm: { suspend_time: 30s, resume_timeout: 240s }"
instances() { emu_instances; }
held() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])'; }
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
show_power_log() { power_log | tail -20 | sed 's/^/#   /'; }
# shown: "NODE=STATE ..." as the user's `cluster show --json` has them
shown() { "$PBX" cluster show --json pv 2>/dev/null | json_get '" ".join("%s=%s" % (n["name"], n["state"]) for n in d["nodes"])'; }
# shown_addrs: "NODE=ADDRESS/PUBLIC/INSTANCE ..." of the compute nodes
# there; emu_addrs: the same of the emulator's running instances
shown_addrs() { "$PBX" cluster show --json pv 2>/dev/null | json_get '" ".join("%s=%s/%s/%s" % (n["name"], n["address"], n["public_address"], n["instance_id"]) for n in d["nodes"] if n["role"] == "compute")'; }
emu_addrs() { emu_get state | json_get '" ".join(sorted("%s=%s/%s/%s" % (i["name"].rsplit("-", 1)[-1], i["networkIP"], i["natIP"], i["name"]) for i in d["instances"] if not i["name"].endswith("-head") and i["status"] == "RUNNING"))'; }
# list_calls: how many instance lists the user's pbx sent (its store's
# request log; the head's pbx lists too)
list_calls() { sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM events WHERE kind = 'http' AND detail LIKE '%GET %/aggregated/instances?%'"; }
# emu_uid NODE: the numeric id of NODE's instance in the emulator
emu_uid() { emu_get state | json_get '"".join(i["id"] for i in d["instances"] if i["name"].endswith("-'"$1"'"))'; }
# as_if_unseen STATE: the user's store has both nodes in STATE, as if no
# verb had learnt otherwise since the start
as_if_unseen() { sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET state = '$1' WHERE name IN ('node1', 'node2')"; }

run_pbx -q cluster start pv
ok $rc "a Compute Engine cluster with min: 0 starts: $errout"
is "$(instances)" "head=RUNNING" "only the head's instance is made"
is "$(shown)" "head=up node1=asleep node2=asleep" "show has both nodes asleep"
uid=$(emu_uid head)
[ -n "$uid" ] && [ "$(node_uid head)" = "$uid" ]
ok $? "the start recorded the head's instance's numeric id as its uid ($(node_uid head) = $uid)"
run_pbx cluster record pv
key=$(cut -d' ' -f1,2 "$PBX_HOME/id.pub")
case $out in *"$key"*) r=0 ;; *) r=1 ;; esac
ok $r "the record the user's start sends the head carries the user's public key"

# a sweep wakes both nodes through SLURM and the head's pbx, with no pbx
# running here (queue_empty: exec on the head, which lists nothing)
mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/e.yaml" <<'EXP'
name: view
command: "sleep 1 && echo done {i}"
sweep: { grid: { i: [1, 2] } }
EXP
run_pbx parrun "$TEST_TMP/exp/e.yaml" pv --cpus-per-task=2
ok $rc "2 tasks of 2 CPUs submitted: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
calls0=$(list_calls)
wait_for 3000 queue_empty pv
ok $? "the queue empties with no pbx running here"
[ "$(instances)" = "head=RUNNING node1=RUNNING node2=RUNNING" ] || show_power_log
is "$(instances)" "head=RUNNING node1=RUNNING node2=RUNNING" "the head made both instances"
is "$(node_states)" "head:up node1:asleep node2:asleep" "the user's store still has them asleep"
is "$(( $(list_calls) - calls0 ))" 0 "exec on the head lists no instance"

# state learns they are up
calls0=$(list_calls)
run_pbx state "$pkg"
ok $rc "state: $errout"
is "$(( $(list_calls) - calls0 ))" 1 "state lists the instances once"
is "$(node_states)" "head:up node1:up node2:up" "state learnt both are up"
# its spend of them is the head's runs (state reached the head): from
# when the head made their instances, not now
run_start() { sqlite3 "$PBX_HOME/pbx.db" "SELECT min(started) FROM node_runs WHERE node = '$1'"; }
s1=$(emu_created node1)
near "$(run_start node1)" "$s1" && near "$(run_start node2)" "$(emu_created node2)"
ok $? "the user's spend of both begins when their instances were made ($(run_start node1), $s1), before state learnt them ($(date +%s))"
is "$(task_states "$pkg")" "COMPLETED COMPLETED" "both tasks completed on them"

# show (and --json) learns it too, with the instances' addresses
as_if_unseen asleep
calls0=$(list_calls)
is "$(shown)" "head=up node1=up node2=up" "show --json lists them up"
is "$(( $(list_calls) - calls0 ))" 1 "with one list of the cloud"
is "$(node_states)" "head:up node1:up node2:up" "and the user's store has them up"
is "$(shown_addrs)" "$(emu_addrs)" "at their instances' addresses"
as_if_unseen asleep
run_pbx cluster show pv
addr=$(emu_get state | json_get '[i["networkIP"] for i in d["instances"] if i["name"].endswith("-node1")][0]')
case $out in *"node1 "*"$addr:"*) r=0 ;; *) r=1 ;; esac
ok $r "show's table has node1 at its instance's address ($addr): $out"

# exec -n learns it, and the user's key reaches them (the head authorized
# it in their ssh-keys)
as_if_unseen asleep
run_pbx cluster exec -n node1 pv -- sh -c 'echo "$PBX_NODE"'
is "$rc:$out" "0:node1" "exec -n node1 runs on the woken node with the user's key: $errout"
# a root the store has wrong (an instance the head made anew has a new
# body, which the user's pbx learns only when it lists): the body's sshd
# names its root, which sudo (the login user is not root) passes on
root1=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT root FROM nodes WHERE name = 'node1'")
sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET root = '/nonexistent/old-body' WHERE name = 'node1'"
run_pbx cluster exec -n node1 pv -- sh -c 'echo "$PBX_NODE"'
is "$rc:$out" "0:node1" "exec -n node1 sources its own env.sh when the store's root is stale: $errout"
sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET root = '$root1' WHERE name = 'node1'"
run_pbx cluster exec -n node2 pv -- sh -c 'cat "$PBX_ROOT/etc/ssh/keys/pbx"'
case $out in *"$key"*) r=0 ;; *) r=1 ;; esac
ok $r "node2 authorizes the user's key: $rc $errout"
# the list finds the same instance (its numeric id, which Compute Engine
# gives no other instance), so the pins stay, and a changed key is refused
uid1=$(emu_uid node1)
[ -n "$uid1" ] && [ "$(node_uid node1)" = "$uid1" ]
ok $? "the store has node1's instance's numeric id as its uid ($(node_uid node1) = $uid1)"
view_keeps_pins pv node1

# a list that fails: the verb goes on with what the store knows, and says so
emu_post faults '{"unavailable": 1.0}' >/dev/null
run_pbx cluster show --json pv
emu_post faults '{"unavailable": 0.0}' >/dev/null
ok $rc "show works while the cloud cannot be listed: $errout"
case $errout in *"warning: cannot list cluster pv's instances"*) r=0 ;; *) r=1 ;; esac
ok $r "  and warns that it could not list ($errout)"
is "$(echo "$out" | json_get '" ".join("%s=%s" % (n["name"], n["state"]) for n in d["nodes"])')" \
	"head=up node1=up node2=up" "  showing what the store knew"

# idle for suspend_time: the head deletes them; state and show learn it
asleep() { [ "$(instances)" = "head=RUNNING" ]; }
wait_for 1800 asleep
ok $? "after 30 s idle the head deleted both instances: $(instances)"
[ "$(instances)" = "head=RUNNING" ] || show_power_log
is "$(node_states)" "head:up node1:up node2:up" "the user's store had them up"
as_if_unseen up
run_pbx state "$pkg"
ok $rc "state: $errout"
is "$(node_states)" "head:up node1:asleep node2:asleep" "state learnt they are asleep"
as_if_unseen up
is "$(shown)" "head=up node1=asleep node2=asleep" "show has them asleep again"
is "$(node_states)" "head:up node1:asleep node2:asleep" "and so has the user's store"
as_if_unseen up
run_pbx cluster exec -n node1 pv -- hostname
[ "$rc" != 0 ]
ok $? "exec -n on a sleeping node fails ($rc)"
is "$(node_states)" "head:up node1:asleep node2:asleep" "  having learnt it sleeps"

# the user's start (a repair) with a store that has them up: it learns
# they sleep, and does not make them again
as_if_unseen up
run_pbx -q cluster start pv
ok $rc "the user's start with the store's nodes up: $errout"
is "$(instances)" "head=RUNNING" "  makes no node the head had deleted"
is "$(node_states)" "head:up node1:asleep node2:asleep" "  and records them asleep"

# the head makes node1 anew (a job wakes it): the same name, a new numeric
# id, a new host key; its old pins are forgotten and the new key taken
keys1=$(node_pin_keys pv node1)
run_pbx cluster exec pv -- srun -w node1 -c2 hostname
ok $rc "a job wakes node1 again: $errout"
[ $rc = 0 ] || show_power_log
uid2=$(emu_uid node1)
[ -n "$uid2" ] && [ "$uid2" != "$uid1" ] && [ -n "$keys1" ]
ok $? "  as a new instance ($uid1, then $uid2), whose pins the store had ($keys1)"
run_pbx cluster exec -n node1 pv -- sh -c 'echo "$PBX_NODE"'
is "$rc:$out" "0:node1" "exec -n node1 reaches the new instance: $errout"
keys2=$(node_pin_keys pv node1)
[ -n "$keys2" ] && [ "$keys2" != "$keys1" ] && [ "$(node_uid node1)" = "$uid2" ]
ok $? "  having forgotten the old pins and pinned its new key ($keys2), under its new uid ($(node_uid node1))"

run_pbx cluster stop --discard-results pv
ok $rc "the user's stop: $errout"
is "$(held)" "0 0 0" "no instance, firewall rule or router is left"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
