#!/bin/sh
# t0457-gce-power-view.sh - cloud/power-view.sh on the Compute Engine
# emulator: the user's view of a power-saving cluster (instances listed by
# label; state, show and exec -n learn which run; a failed list warns; pins
# forgotten when the head makes a node anew).
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/power-view.sh"
