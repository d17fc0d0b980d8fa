#!/bin/sh
# t0452-gce-power-saving.sh - cloud/power-saving.sh on the Compute Engine
# emulator: SLURM power saving with the head's own pbx making and deleting
# the nodes (one bulkInsert), named by their instance names; autostop
# removes awake nodes before the head stops.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/power-saving.sh"
