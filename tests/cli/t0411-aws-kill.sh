#!/bin/sh
# t0411-aws-kill.sh - pbx killed with -9 at 5 points of `pbx cluster start`
# of an EC2 template against moto (tests/emulators/aws, as in t0410):
# before anything exists, once RunInstances was sent, once the instances
# run, mid-bootstrap, a moment later; each time `pbx cluster stop` then
# leaves no live instance, security group, key pair or node body (listed
# with the AWS CLI).  Its own addresses and ports (ctest runs it beside
# t0410, which has aws_lib.sh's): the slot's $SLOT_NET.1.0/24 and
# $SLOT_NET.2.0/24, SLURM ports from BODY_PORT_BASE + 64*8 (lib.sh).
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE
. "$(dirname "$0")/aws_lib.sh"

# ------------------------------------------------------ kill -9 mid-start
# Killed at 5 points (by gpu2's state in the store, or moto's): before
# anything exists, once instances exist, once they run, mid-bootstrap, a
# moment later; each followed by stop.
at() { gpu2_at "$1" || { [ "$1" = instances ] && [ "$(calls calls RunInstances)" -ge 1 ]; }; }
for point in planned instances running bootstrapping late; do
	h_start
	pbx_bg cluster start e1
	wait_bg 500 0.02 at "$point"
	[ "$point" != late ] || sleep 0.5
	kill9
	run_pbx cluster stop --discard-results e1
	ok $rc "stop after kill -9 at '$point' (gpu2 was '$st'): $errout"
	wait_for 300 prints 0 bodies
	is "$(holds):$(bodies)" "0 0 0:0" "nothing is left after kill -9 at '$point' and stop"
done
done_testing
