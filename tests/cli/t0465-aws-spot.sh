#!/bin/sh
# t0465-aws-spot.sh - cloud/spot.sh on EC2 (the moto harness's node
# bodies, IMDSv2's spot/instance-action): a spot node preempted mid-task
# loses nothing.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/spot.sh"
