#!/bin/sh
# t0458-aws-power-saving.sh - cloud/power-saving.sh on EC2 (the moto
# harness): SLURM power saving with the head's own pbx making (one
# RunInstances, the head's key as a second key pair) and terminating the
# nodes, found by the names the head writes into every /etc/hosts.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/power-saving.sh"
