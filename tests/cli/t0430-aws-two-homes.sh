#!/bin/sh
# t0430-aws-two-homes.sh - cloud/two-homes.sh on EC2 (the moto harness):
# two pbx homes start a cluster of one name in one account, each with its
# own security group and key pair; a stop from an empty home deletes
# nothing, `--id` exactly one, each stop leaves the other whole.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/two-homes.sh"
