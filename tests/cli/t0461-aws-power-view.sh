#!/bin/sh
# t0461-aws-power-view.sh - cloud/power-view.sh on EC2 (the moto
# harness): the user's view of a power-saving cluster (one
# DescribeInstances; nodes named by pbx-launch, an untagged instance not
# learnt and tagged by the head's next start).
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/power-view.sh"
