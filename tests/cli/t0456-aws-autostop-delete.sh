#!/bin/sh
# t0456-aws-autostop-delete.sh - cloud/autostop-delete.sh on EC2 (the moto
# harness): autostop_action: delete; the idle cluster stops while results
# are not harvested, and once they are, the head deletes it with its
# instance profile's credentials, leaving its group first, itself last.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/autostop-delete.sh"
