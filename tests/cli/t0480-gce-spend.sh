#!/bin/sh
# t0480-gce-spend.sh - cloud/spend.sh on the Compute Engine emulator: each
# node's runs at its price, the spend, runs ended at the cloud's
# lastStopTimestamp, a budget that warns, refuses, and that the head holds
# the cluster to by powering it off.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/spend.sh"
