#!/bin/sh
# t0463-gce-spot-power.sh - cloud/spot-power.sh on the Compute Engine
# emulator: a preempted Spot node that SLURM's power saving makes comes
# back by itself (the suspend's DELETE during the notice refused with
# resourceNotReady, and asked again).
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/spot-power.sh"
