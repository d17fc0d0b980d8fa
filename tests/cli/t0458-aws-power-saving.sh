#!/bin/sh
# t0458-aws-power-saving.sh - SLURM power saving on EC2 (moto with the
# harness's node bodies and IMDS; issue 19, section 2; docs/power-saving.md
# "On EC2"): a group with min: 0 and max: 2 starts with the head alone;
# slurm.conf names the sleeping nodes pw-node1 and pw-node2, which no EC2
# DNS knows; a job makes slurmctld run pbx-resume, which runs the head's
# own pbx (pbx-head: the instance profile's credentials from IMDS, its own
# key, imported as a second key pair of the cluster), which makes both
# instances in one RunInstances, bootstraps them and writes the names'
# addresses into every node's /etc/hosts; after SuspendTime idle the head
# terminates them; a second job wakes them again (new instances) and finds
# them by name; the user's `stop` leaves no instance, security group or key
# pair.  Each body has an /etc/hosts of its own, as a VM has.  Addresses:
# subnets 127.0.125.0/24 and 127.0.126.0/24; SLURM ports from 11000 + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.125.0/24 H_SUBNET2=127.0.126.0/24 H_SLURM_PORT_BASE=11000 H_CLUSTERS="pw"
. "$(dirname "$0")/aws_lib.sh"

h_start
aws_power_cluster pw "{ name: node, count: 2, min: 0, machine_type: t3.large, cpus: 2 }" "{ suspend_time: 20s, resume_timeout: 240s }"
instances() { aws_instances pw; }
# "ADDRESS KEYNAME" of each running node instance, sorted by address.
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
sinfo_states() { "$PBX" cluster exec pw -- sinfo -h -N -o '%N %t' 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; }
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
show_power_log() { power_log | tail -20 | sed 's/^/#   /'; }
# The names block of a body's /etc/hosts ("ADDRESS NAME" lines).
hosts_block() { sed -n '/^# pbx: nodes of cluster pw that sleep (begin)$/,/(end)$/p' "$1" | grep -v '^#'; }

run_pbx -q cluster start pw
ok $rc "an EC2 cluster with min: 0 starts: $errout"
is "$(instances)" "head=running" "only the head's instance is made"
is "$(node_states)" "head:up node1:asleep node2:asleep" "both nodes are asleep"
is "$(sinfo_states)" "node1 idle~ node2 idle~" "SLURM knows them powered down (idle~)"
run_pbx cluster exec pw -- sh -c 'grep -E "^NodeName=node1 " "$SLURM_CONF" | tr " " "\n" | grep -E "^(NodeAddr|State)="'
is "$out" "NodeAddr=pw-node1
State=CLOUD" "slurm.conf names node1 pw-node1, which no EC2 DNS knows"
head_conf=$(find "$BODIES" -path '*/etc/slurm/slurm.conf' | head -1)
head_root=${head_conf%/etc/slurm/slurm.conf}
conf_sum=$(md5sum <"$head_conf")
is "$(holds)" "1 1 1" "one instance, security group and key pair (the user's)"
runs0=$(calls calls RunInstances)

# a job: slurmctld runs pbx-resume, which runs pbx-head; nothing of pbx
# runs on the user's side meanwhile (exec's SSH session waits for srun)
run_pbx cluster exec pw -- srun -N2 -c2 hostname
ok $rc "srun -N2 wakes both nodes and runs on them: $errout"
[ $rc = 0 ] || show_power_log
is "$(instances)" "head=running node=running node=running" "the head made both instances"
is "$(( $(calls calls RunInstances) - runs0 ))" 1 "in one RunInstances"
is "$(holds)" "3 1 2" "and imported its own key as the cluster's second key pair"
is "$(node_instances | awk '{print $2}' | sort -u | grep -c "^pbx-pw-.*-[0-9a-f]\{8\}$")" 1 \
	"both instances hold the head's key pair"
addrs1=$(node_instances | awk '{print $1}' | tr '\n' ' ')
is "$(hosts_block "$head_root/etc/hosts" | awk '{print $1}' | sort | tr '\n' ' ')" "$addrs1" \
	"the head's /etc/hosts has both instances' addresses"
is "$(hosts_block "$head_root/etc/hosts" | awk '{print $2}' | tr '\n' ' ')" "pw-node1 pw-node2 " \
	"under the names slurm.conf gives"
for f in $(find "$BODIES" -path '*/etc/hosts' ! -path "$head_root/*"); do
	is "$(hosts_block "$f")" "$(hosts_block "$head_root/etc/hosts")" "a node's /etc/hosts has the same block"
done
is "$(md5sum <"$head_conf")" "$conf_sum" "slurm.conf did not change"
is "$(power_log | grep -c ' resume node\[1-2\]$')" 1 "pbx-power.log has one resume of node[1-2]"

# idle for suspend_time: SLURM runs pbx-suspend, the head terminates them
asleep() { [ "$(instances)" = "head=running" ]; }
wait_for 1200 asleep
ok $? "after 20 s idle the head terminated both instances: $(instances)"
[ "$(instances)" = "head=running" ] || show_power_log
wait_for 900 prints "node1 idle~ node2 idle~" sinfo_states
is "$(sinfo_states)" "node1 idle~ node2 idle~" "SLURM has them powered down"

# again: new instances, found by name through the block the head rewrote
run_pbx cluster exec pw -- srun -N2 -c2 hostname
ok $rc "srun wakes both nodes again and runs on them: $errout"
[ $rc = 0 ] || show_power_log
is "$(instances)" "head=running node=running node=running" "made anew"
addrs2=$(node_instances | awk '{print $1}' | tr '\n' ' ')
[ "$addrs2" != "$addrs1" ]
ok $? "at new addresses ($addrs1-> $addrs2)"
is "$(hosts_block "$head_root/etc/hosts" | awk '{print $1}' | sort | tr '\n' ' ')" "$addrs2" \
	"the head's /etc/hosts has them"

run_pbx cluster stop --discard-results pw
ok $rc "the user's stop: $errout"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left, the head's included"
# the harness ends a terminated instance's body on its next look (0.2 s)
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
