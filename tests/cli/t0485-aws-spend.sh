#!/bin/sh
# t0485-aws-spend.sh - cloud/spend.sh on EC2 (the moto harness): each
# node's runs at its price, the spend, runs ended at the time in EC2's
# state-transition reason, a budget that warns, refuses (no StartInstances,
# no RunInstances), and that the head holds the cluster to.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/spend.sh"
