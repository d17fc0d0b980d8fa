#!/bin/sh
# t0454-gce-power-kill.sh - cloud/power-kill.sh on the Compute Engine
# emulator: the head's resume killed with SIGKILL at four points, a
# suspend during a resume, a stray resume's instance and the user's stop.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/power-kill.sh"
