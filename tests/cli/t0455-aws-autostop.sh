#!/bin/sh
# t0455-aws-autostop.sh - cloud/autostop.sh on EC2 (the moto harness): an
# idle cluster powers itself off (head and node stopped, the Spot node
# terminated, disks kept), start brings it back; the head's instance
# profile deletes the cluster by its id; an unknown profile is refused.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/autostop.sh"
