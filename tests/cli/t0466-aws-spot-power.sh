#!/bin/sh
# t0466-aws-spot-power.sh - a preempted spot node that SLURM's power saving
# makes comes back by itself on EC2 (the moto harness's node bodies and
# IMDS; issue 19, sections 2 and 3; docs/spot.md): t0463's round on EC2.
# A spot group with min: 0 starts with the head alone; a pbx-train task
# wakes node1 (pbx-resume on the head, which runs pbx-head with the
# instance profile's credentials); the harness sends node1 a spot
# interruption notice (30 s, then it terminates the instance); node1's
# pbx-preempt marks it POWER_DOWN_ASAP and sends the job SIGTERM; pbx-train
# checkpoints, exits 75 and is requeued; slurmctld runs pbx-suspend (a
# TerminateInstances during the notice) and, for the requeued job,
# pbx-resume, which makes a new instance at a new address that every node
# learns through its /etc/hosts block; the task resumes there and
# completes, bit-identical to an uninterrupted twin.  Subnets
# 127.0.135.0/24 and 127.0.136.0/24; SLURM ports from 17000 + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.135.0/24 H_SUBNET2=127.0.136.0/24 H_SLURM_PORT_BASE=17000 H_CLUSTERS="sq"
. "$(dirname "$0")/aws_lib.sh"

h_start
aws_power_cluster sq "{ name: spot, count: 1, min: 0, machine_type: t3.large, cpus: 2, spot: true }" \
	"{ suspend_time: 300s, resume_timeout: 240s }"
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }

run_pbx -q cluster start sq
ok $rc "an EC2 spot group with min: 0 starts: $errout"
is "$(node_states)" "head:up spot1:asleep" "only the head is made"
spot_train sq
ID1=$(aws_spot_instances)
[ -n "$ID1" ]
ok $? "the head made node1's spot instance ($ID1)"
spot_watching aws "the woken node"

got=$(aws_spot_interrupt "${ID1%@*}")
is "$got" "terminate" "the harness interrupts node1 (terminate in 30 s)"
spot_power_notice "$plog"

# from here nothing on the user's side but reading
spot_power_back sq
power_log | grep -q 'error' && r=1 || r=0
ok $r "no power action failed: $(power_log | grep error | head -n 2)"
spot_resumed 60
ID2=$(aws_spot_instances)
[ -n "$ID2" ] && [ "${ID2%@*}" != "${ID1%@*}" ]
ok $? "on a new instance of node1 ($ID1, then $ID2)"
spot_twin sq

run_pbx -q cluster stop --discard-results sq
ok $rc "stop: $errout"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left, the head's included"
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
