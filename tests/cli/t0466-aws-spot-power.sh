#!/bin/sh
# t0466-aws-spot-power.sh - cloud/spot-power.sh on EC2 (the moto
# harness's node bodies and IMDS): a preempted spot node that SLURM's power
# saving makes comes back by itself, at a new address.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/spot-power.sh"
