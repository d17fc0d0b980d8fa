#!/bin/sh
# t0450-gce-autostop.sh - cloud/autostop.sh on the Compute Engine emulator:
# an idle cluster powers itself off (guest shutdowns, TERMINATED, disks
# kept), start brings it back; the head alone powered off; the head's
# service account deletes the cluster by its id.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/autostop.sh"
