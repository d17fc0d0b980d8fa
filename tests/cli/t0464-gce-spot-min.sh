#!/bin/sh
# t0464-gce-spot-min.sh - cloud/spot-min.sh on the Compute Engine
# emulator: a preempted Spot node within its group's min: is powered up
# again by pbx-suspend, made anew by pbx-resume, and its task completes
# from its checkpoint with an uninterrupted twin's parameters.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/spot-min.sh"
