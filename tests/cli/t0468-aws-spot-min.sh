#!/bin/sh
# t0468-aws-spot-min.sh - a preempted spot node that always runs (within its
# group's min:) comes back by itself on EC2 (the moto harness's node bodies
# and IMDS; issue 19, section 3; docs/spot.md): t0464's round on EC2, where
# no DNS knows a node's name, so slurm.conf names spot1 sm-spot1 and the
# user's start writes it into every node's /etc/hosts block, and the head's
# resume its new address.  A spot group with count 2, min 1 starts with
# spot1 made and spot2 asleep; a pbx-train task runs on spot1; the harness
# interrupts spot1 (30 s, then it terminates the instance); spot1's
# pbx-preempt marks it POWER_DOWN_ASAP and sends the job SIGTERM; the task
# checkpoints and is requeued; slurmctld runs pbx-suspend for spot1, which
# powers it up again once SLURM has it down: pbx-resume makes a new
# instance.  The task completes from its checkpoint, bit-identical to an
# uninterrupted twin; after suspend_time spot1 still runs, spot2 sleeps.
# Subnets 127.0.147.0/24 and 127.0.148.0/24; SLURM ports from 3000 + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.147.0/24 H_SUBNET2=127.0.148.0/24 H_SLURM_PORT_BASE=3000 H_CLUSTERS="sm"
. "$(dirname "$0")/aws_lib.sh"

h_start
aws_power_cluster sm "{ name: spot, count: 2, min: 1, machine_type: t3.large, cpus: 2, spot: true }" \
	"{ suspend_time: 30s, resume_timeout: 240s }"
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
hosts_block() { sed -n '/^# pbx: nodes of cluster sm that sleep (begin)$/,/(end)$/p' "$1" | grep -v '^#'; }

run_pbx -q cluster start sm
ok $rc "an EC2 spot group with count 2, min 1 starts: $errout"
is "$(node_states)" "head:up spot1:up spot2:asleep" "spot1 is made, spot2 sleeps"
ID1=$(aws_spot_instances)
# the head's body: the one slurmctld runs in
head_log=$(find "$BODIES" -path '*/var/log/slurm/slurmctld.log' | head -n 1)
head_root=${head_log%/var/log/slurm/slurmctld.log}
head_conf=$head_root/etc/slurm/slurm.conf
is "$(grep -E '^NodeName=spot1 ' "$head_conf" | tr ' ' '\n' | grep -E '^(NodeAddr|State)=' | tr '\n' ' ')" \
	"NodeAddr=sm-spot1 State=UNKNOWN " "slurm.conf names spot1 sm-spot1, a node that always runs"
is "$(hosts_block "$head_root/etc/hosts")" "${ID1#*@} sm-spot1" \
	"the user's start wrote spot1's address into the head's /etc/hosts block"

spot_train sm
spot_watching aws "spot1"
got=$(aws_spot_interrupt "${ID1%@*}")
is "$got" "terminate" "the harness interrupts spot1 (terminate in 30 s)"
spot_power_notice "$plog"

# from here nothing on the user's side but reading
powered_up() { power_log | grep -q ' power_up spot1 (a Spot node that always runs)$'; }
wait_for 3000 powered_up
ok $? "pbx-suspend powered spot1 up again once SLURM had it down: $(power_log | grep -E ' (resume|suspend|power_up) ' | tr '\n' '|')"
spot_resumed 900
settled() {
	i=$(aws_spot_instances)
	[ -n "$i" ] && [ "${i#* }" = "$i" ] && [ "${i%@*}" != "${ID1%@*}" ] &&
		[ "$("$PBX" cluster exec sm -- sinfo -h -N -n spot1,spot2 -o '%N %t %E' 2>/dev/null | tr '\n' ' ')" = "spot1 idle none spot2 idle~ none " ]
}
wait_for 6000 settled
ok $? "spot1 runs as a new instance ($ID1, then $(aws_spot_instances)), spot2 sleeps: $("$PBX" cluster exec sm -- sinfo -h -o '%N %t %E' 2>&1 | tr '\n' '|')"
ID2=$(aws_spot_instances)
is "$(hosts_block "$head_root/etc/hosts" | grep ' sm-spot1$')" "${ID2#*@} sm-spot1" \
	"the head's /etc/hosts block has spot1's new address"
power_log | grep -q 'error' && r=1 || r=0
ok $r "no power action failed: $(power_log | grep error | head -n 2)"
run_pbx cluster exec -n spot1 sm -- hostname
ok $rc "the user's exec reaches the new spot1: $out $errout"
spot_twin sm

run_pbx -q cluster stop --discard-results sm
ok $rc "stop: $errout"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left, the head's included"
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
