#!/bin/sh
# t0460-gce-spot.sh - cloud/spot.sh on the Compute Engine emulator: a Spot
# node preempted mid-task loses nothing (its watcher's settings name the
# cloud, pbx-train's checkpoint on SIGTERM, the preempted body's processes
# gone, the new instance's host key pinned afresh).
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/spot.sh"
