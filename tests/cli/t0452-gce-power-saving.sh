#!/bin/sh
# t0452-gce-power-saving.sh - SLURM power saving on Compute Engine (the
# emulator's node bodies; issue 19, section 2; docs/power-saving.md): a
# group with min: 0 and max: 2 starts with the head alone; slurm.conf names
# the sleeping nodes by their instance names, which the cluster's internal
# DNS resolves once they exist; a 2-task sweep submitted with no pbx
# running on the user's side makes slurmctld run pbx-resume, which runs the
# head's own pbx (pbx-head: the head's service account, key and store),
# which makes both instances in one bulkInsert and bootstraps them; every
# task completes on them; after SuspendTime idle pbx-suspend deletes them
# (the head stays), also after the user's start sent the head a record that
# has them asleep; a job wakes a node again (a new instance, a new
# address); autostop removes the awake nodes before the head stops, and a
# start and a job bring them back; the user's `stop` leaves nothing.  Emulator addresses
# $SLOT_NET.1.0/24 (private) and $SLOT_NET.2.0/24 (public); SLURM ports from
# BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"

gce_power_cluster pw "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24" "$BODY_PORT_BASE" "{ name: node, count: 2, min: 0, machine_type: e2-standard-2, cpus: 2 }" \
	"slurm: { suspend_time: 40s, resume_timeout: 240s }
    budget: 1000000
    head: { machine_type: e2-standard-2, service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }"
# a budget far from spent: the head keeps its deadline through its own
# starts (power saving), which have no prices (docs/cost.md)
sed -i '/^    head: { service_account/d' "$PBX_HOME/config.yaml"
printf 'prices:\n  hourly: { e2-standard-2: 1 }\n' >>"$PBX_HOME/config.yaml"
budget_until() { find "$BODIES" -path '*/etc/pbx/autostop.conf' -exec grep -l "^PBX_ROLE='head'" {} + |
	xargs sed -n "s/^PBX_BUDGET_UNTIL='\([0-9]*\)'\$/\1/p"; }
instances() { emu_instances; }
held() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])'; }
sinfo_states() { "$PBX" cluster exec pw -- sinfo -h -N -o '%N %t' 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; }
bulk_inserts() { grep -c 'POST /compute/v1/projects/pbx-test/zones/[^/]*/instances/bulkInsert' "$TEST_TMP/emu.log"; }
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
show_power_log() { power_log | tail -20 | sed 's/^/#   /'; }

run_pbx -q cluster start pw
ok $rc "a Compute Engine cluster with min: 0 starts: $errout"
is "$(instances)" "head=RUNNING" "only the head's instance is made"
is "$(node_states)" "head:up node1:asleep node2:asleep" "both nodes are asleep"
is "$(sinfo_states)" "node1 idle~ node2 idle~" "SLURM knows them powered down (idle~)"
iname=$(emu_get state | json_get 'd["instances"][0]["name"]')
iname=${iname%-head}
run_pbx cluster exec pw -- sh -c 'grep -E "^NodeName=node1 " "$SLURM_CONF" | tr " " "\n" | grep -E "^(NodeAddr|State)="; grep "^ResumeProgram=" "$SLURM_CONF" | sed "s#=/.*/#=#"'
is "$out" "NodeAddr=$iname-node1
State=CLOUD
ResumeProgram=pbx-resume" "slurm.conf names node1 by its instance name, resolved once it exists"
head_conf=$(find "$BODIES" -path '*/etc/slurm/slurm.conf' | head -1)
conf_sum=$(md5sum <"$head_conf")
ctld_pid() { cat "${head_conf%/etc/slurm/slurm.conf}"/run/slurmctld.pid 2>/dev/null; }
ctld0=$(ctld_pid)
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
[ -x "$pbx_head" ]
ok $? "the head runs pbx of its own (pbx-head)"
bulk0=$(bulk_inserts)
until0=$(budget_until)
[ "${until0:-0}" -gt "$(date +%s)" ]
ok $? "the user's start gave the head the budget's deadline: '$until0'"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/e.yaml" <<'EXP'
name: wake
command: "sleep 1 && echo done {i}"
sweep: { grid: { i: [1, 2] } }
EXP
run_pbx parrun "$TEST_TMP/exp/e.yaml" pw --cpus-per-task=2
ok $rc "2 tasks of 2 CPUs submitted: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
# from here no pbx runs on the user's side until the tasks are done:
# slurmctld runs pbx-resume, which runs pbx-head
wait_for 3000 queue_empty pw
ok $? "the queue empties with no pbx running here"
wait_final "$pkg" 60
is "$(task_states "$pkg")" "COMPLETED COMPLETED" "both tasks completed on the nodes the head made"
is "$(task_nodes "$pkg")" "node1 node2" "one on each node (2 CPUs a task, 2 a node)"
[ "$(task_states "$pkg")" = "COMPLETED COMPLETED" ] || show_power_log
is "$(instances)" "head=RUNNING node1=RUNNING node2=RUNNING" "the head made both instances"
is "$(( $(bulk_inserts) - bulk0 ))" 1 "in one bulkInsert"
is "$(budget_until)" "$until0" "the head's own start kept the budget's deadline the user's start computed"
nodes_of() { json_get '" ".join("%s=%s" % (n["name"], n["state"]) for n in d["nodes"])'; }
is "$("$pbx_head" cluster show pw --json | nodes_of)" "head=up node1=up node2=up" "the head's store has them up"
is "$(power_log | grep -c ' resume node\[1-2\]$')" 1 "pbx-power.log has one resume of node[1-2]"
# slurm.conf never changes as nodes wake: the head's start renders the
# user's, and slurmctld goes on
is "$(md5sum <"$head_conf")" "$conf_sum" "the head's slurm.conf is the one the user's start wrote"
# each body's copy names its own root
same_confs() { for f in $(find "$BODIES" -path '*/etc/slurm/slurm.conf'); do
	sed "s#${f%/etc/slurm/slurm.conf}#@ROOT@#g" "$f" | md5sum; done | sort -u | grep -c .; }
is "$(same_confs)" 1 "and the nodes the head made have the same"
is "$(ctld_pid)" "$ctld0" "slurmctld was not restarted"

# the user's start (a repair) while they are awake: the user's store has
# them asleep, and so has the record it sends the head, but the head keeps
# what it knows of its awake nodes (else it would never remove them)
run_pbx -q cluster start pw
ok $rc "the user's start while the head's nodes are awake: $errout"
is "$(instances)" "head=RUNNING node1=RUNNING node2=RUNNING" "leaves the head's instances alone"
is "$("$pbx_head" cluster show pw --json | nodes_of)" "head=up node1=up node2=up" "and the head's store has them up still"

# idle for suspend_time: SLURM runs pbx-suspend, the head deletes them
asleep() { [ "$(instances)" = "head=RUNNING" ]; }
wait_for 1800 asleep
ok $? "after 40 s idle the head deleted both instances: $(instances)"
[ "$(instances)" = "head=RUNNING" ] || show_power_log
# pbx-suspend records them asleep after the deletes the emulator shows
# (under load, a moment later): wait for it, with a bound
head_nodes() { "$pbx_head" cluster show pw --json | nodes_of; }
wait_secs 60 prints "head=up node1=asleep node2=asleep" head_nodes
is "$(head_nodes)" "head=up node1=asleep node2=asleep" "the head's store has them asleep"
wait_for 900 prints "node1 idle~ node2 idle~" sinfo_states
is "$(sinfo_states)" "node1 idle~ node2 idle~" "SLURM has them powered down"

# again: a new instance has a new address, which SLURM finds by its name
before=$(emu_get state | json_get '" ".join(sorted(i["name"] for i in d["instances"]))')
run_pbx cluster exec pw -- srun -N2 -c2 hostname
ok $rc "srun wakes both nodes again and runs on them: $out $errout"
[ $rc = 0 ] || show_power_log
is "$(instances)" "head=RUNNING node1=RUNNING node2=RUNNING" "made anew"

# autostop with nodes awake: the head removes them first (as a suspend
# does: deleted, not left stopped with their disks), then stops itself;
# a start brings the head back and a job wakes the nodes again
export PBX_AUTOSTOP_TICK=1
run_pbx -q cluster start pw --autostop 10s
ok $rc "a start sets autostop 10s: $errout"
stopped() { [ "$(instances)" = "head=TERMINATED" ]; }
wait_for 1200 stopped
ok $? "idle for 10 s, the head deleted the nodes and stopped itself: $(instances)"
[ "$(instances)" = "head=TERMINATED" ] || find "$BODIES" -name 'pbx-autostop.log' -exec tail -5 {} + | sed 's/^/#   /'
run_pbx -q cluster start pw --autostop off
ok $rc "start brings the head back: $errout"
run_pbx cluster exec pw -- srun -N2 -c2 hostname
ok $rc "a job wakes both nodes again: $out $errout"
[ $rc = 0 ] || show_power_log

run_pbx cluster stop --discard-results pw
ok $rc "the user's stop: $errout"
is "$(held)" "0 0 0" "no instance, firewall rule or router is left, the nodes the head made included"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
