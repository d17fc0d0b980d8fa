#!/bin/sh
# t0459-aws-power-kill.sh - cloud/power-kill.sh on EC2 (the moto harness):
# the head's resume killed with SIGKILL at four points, a resume into the
# next subnet when the first is out of capacity, a stray resume's instance
# and the user's stop.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/power-kill.sh"
