#!/bin/sh
# t0461-aws-power-view.sh - the user's view of a power-saving cluster on
# EC2 (moto with the harness's node bodies and IMDS; issue 19;
# docs/power-saving.md, "The laptop's view" and "On EC2"): the head's own
# pbx makes and terminates the nodes with no pbx running on the user's
# side; the one RunInstances that makes both names each instance's node
# (pbx-role and pbx-launch, read with each instance's amiLaunchIndex:
# src/cloud/aws/launch.c), with no CreateTags, so `cluster show --json`
# learns from one DescribeInstances which
# nodes run and at which addresses; the head's bootstrap of a woken node
# authorizes the user's key (the record's user_key), so `exec -n` from here
# reaches it although its key pair is the head's; an instance whose tags
# name no node (its launch tag removed) is not learnt, and the head's next
# start tags it (pbx-node, one CreateTags); once the head has
# terminated them, show has them asleep again; the user's `stop` leaves
# nothing.  Addresses: subnets 127.0.133.0/24 and 127.0.134.0/24; SLURM
# ports from 22000.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.133.0/24 H_SUBNET2=127.0.134.0/24 H_SLURM_PORT_BASE=22000 H_CLUSTERS="pv"
. "$(dirname "$0")/aws_lib.sh"

h_start
aws_power_cluster pv "{ name: node, count: 2, min: 0, machine_type: t3.large, cpus: 2 }" "{ suspend_time: 90s, resume_timeout: 240s }"
instances() { aws_instances pv; }
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
show_power_log() { power_log | tail -20 | sed 's/^/#   /'; }
# shown: "NODE=STATE ..." as the user's `cluster show --json` has them
shown() { "$PBX" cluster show --json pv 2>/dev/null | json_get '" ".join("%s=%s" % (n["name"], n["state"]) for n in d["nodes"])'; }
# shown_addrs: "NODE=ADDRESS/PUBLIC/INSTANCE ..." of the compute nodes
# there; moto_addrs: the same of the running node instances, NODE from
# the node their tags name (node_of, aws_lib.sh; "?" when none)
shown_addrs() { "$PBX" cluster show --json pv 2>/dev/null | json_get '" ".join("%s=%s/%s/%s" % (n["name"], n["address"], n["public_address"], n["instance_id"]) for n in d["nodes"] if n["role"] == "compute")'; }
moto_addrs() {
	h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-role", "Values": ["node"]},
                                       {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]:
    for i in r["Instances"]:
        out.append("%s=%s/%s/%s" % (node_of(i), i["PrivateIpAddress"], i.get("PublicIpAddress"), i["InstanceId"]))
print(" ".join(sorted(out)))
PY
}
# instance_of NODE: the id of NODE's running instance (by its tag)
instance_of() { moto_addrs | tr ' ' '\n' | sed -n "s|^$1=.*/||p"; }
# as_if_unseen STATE: the user's store has both nodes in STATE, as if no
# verb had learnt otherwise since the start
as_if_unseen() { sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET state = '$1' WHERE name IN ('node1', 'node2')"; }

run_pbx -q cluster start pv
ok $rc "an EC2 cluster with min: 0 starts: $errout"
is "$(instances)" "head=running" "only the head's instance is made"
is "$(shown)" "head=up node1=asleep node2=asleep" "show has both nodes asleep"
run_pbx cluster record pv
key=$(cut -d' ' -f1,2 "$PBX_HOME/id.pub")
case $out in *"$key"*) r=0 ;; *) r=1 ;; esac
ok $r "the record the user's start sends the head carries the user's public key"
head_conf=$(find "$BODIES" -path '*/etc/slurm/slurm.conf' | head -1)
head_root=${head_conf%/etc/slurm/slurm.conf}

# a job wakes both nodes through SLURM and the head's pbx, with no pbx
# running here (exec's SSH session on the head waits for srun)
tags0=$(calls calls CreateTags) runs0=$(calls calls RunInstances)
run_pbx cluster exec pv -- srun -N2 -c2 hostname
ok $rc "srun -N2 wakes both nodes and runs on them: $errout"
[ $rc = 0 ] || show_power_log
is "$(instances)" "head=running node=running node=running" "the head made both instances"
is "$(node_states)" "head:up node1:asleep node2:asleep" "the user's store still has them asleep"
is "$(( $(calls calls RunInstances) - runs0 ))" 1 "  with one RunInstances"
is "$(moto_addrs | tr ' ' '\n' | cut -d= -f1 | tr '\n' ' ')" "node1 node2 " \
	"its tags name each instance's node (pbx-launch, by launch index)"
is "$(( $(calls calls CreateTags) - tags0 ))" 0 "  with no CreateTags"

# show --json learns they are up, at their instances' addresses, from one
# DescribeInstances
desc0=$(calls calls DescribeInstances)
is "$(shown)" "head=up node1=up node2=up" "show --json lists them up"
is "$(( $(calls calls DescribeInstances) - desc0 ))" 1 "  with one DescribeInstances"
is "$(node_states)" "head:up node1:up node2:up" "  and the user's store has them up"
is "$(shown_addrs)" "$(moto_addrs)" "  at their instances' addresses"
# the user's spend of them is the head's runs (show reached the head):
# from their instances' launchTime, within 2 s
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
run_start() { sqlite3 "$PBX_HOME/pbx.db" "SELECT min(started) FROM node_runs WHERE node = '$1'"; }
launched_at() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
l=$(launched)
near "$(run_start node1)" "$(launched_at "$l" node1)" && near "$(run_start node2)" "$(launched_at "$l" node2)"
ok $? "  and the user's spend of them is the head's runs, from their instances' launchTime ($(run_start node1) $(run_start node2); $l)"

# exec -n from here reaches them with the user's key: their key pair is
# the head's, and the head's bootstrap authorized the user's key
as_if_unseen asleep
run_pbx cluster exec -n node1 pv -- sh -c 'echo "$PBX_NODE"'
is "$rc:$out" "0:node1" "exec -n node1 runs on the woken node with the user's key: $errout"
run_pbx cluster exec -n node2 pv -- sh -c 'echo "$PBX_NODE"'
is "$rc:$out" "0:node2" "exec -n node2 too: $errout"
# the list finds the same instance (an EC2 id is never reused: it is the
# instance's uid), so the pins stay, and a changed key is refused
is "$(node_uid node1)" "$(instance_of node1)" "the store has node1's instance id as its uid"
view_keeps_pins pv node1
# so does `cluster ssh NAME NODE` (OpenSSH, with the keys pbx pinned)
as_if_unseen asleep
run_pbx cluster ssh pv node2 -- sh -c 'echo "$PBX_NODE"'
is "$rc:$(node_states)" "0:head:up node1:up node2:up" "cluster ssh pv node2 learns node2 up and reaches it: $errout"
n=0
for f in $(find "$BODIES" -path '*/.ssh/authorized_keys' ! -path "$head_root/*"); do
	grep -q "^$key pbx-user:pv\$" "$f" && n=$((n + 1))
done
is "$n" 2 "both nodes authorize the user's key, tagged pbx-user:pv"

# an instance whose tags name no node (its launch tag removed) is not
# learnt: that node reads asleep, the other up
h_py "$(instance_of node2)" <<'PY'
c.delete_tags(Resources=[sys.argv[1]], Tags=[{"Key": "pbx-launch"}])
PY
as_if_unseen asleep
is "$(shown)" "head=up node1=up node2=asleep" "an untagged instance is not learnt"
is "$(instances)" "head=running node=running node=running" "  and nothing is removed"
# the head's next start (a resume checks every node that is up) tags it
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
tags0=$(calls calls CreateTags)
out=$("$pbx_head" -q cluster start pv 2>&1)
ok $? "a start by the head's pbx: $out"
is "$(( $(calls calls CreateTags) - tags0 ))" 1 "  tags node2's instance (one CreateTags), not node1's again"
is "$(moto_addrs | tr ' ' '\n' | cut -d= -f1 | tr '\n' ' ')" "node1 node2 " "  so each instance carries its node's name again"
is "$(shown)" "head=up node1=up node2=up" "  and show learns node2 up again"

# idle for suspend_time: the head terminates them (node2's instance by the
# id its store has); show learns it
asleep() { [ "$(instances)" = "head=running" ]; }
wait_for 1800 asleep
ok $? "after 90 s idle the head terminated both instances: $(instances)"
[ "$(instances)" = "head=running" ] || show_power_log
as_if_unseen up
is "$(shown)" "head=up node1=asleep node2=asleep" "show has them asleep again"
is "$(node_states)" "head:up node1:asleep node2:asleep" "  and so has the user's store"
as_if_unseen up
run_pbx cluster exec -n node1 pv -- hostname
[ "$rc" != 0 ]
ok $? "exec -n on a sleeping node fails ($rc)"
is "$(node_states)" "head:up node1:asleep node2:asleep" "  having learnt it sleeps"

run_pbx cluster stop --discard-results pv
ok $rc "the user's stop: $errout"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left, the head's included"
# the harness ends a terminated instance's body on its next look (0.2 s)
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
