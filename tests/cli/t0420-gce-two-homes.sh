#!/bin/sh
# t0420-gce-two-homes.sh - cloud/two-homes.sh on the Compute Engine
# emulator: two pbx homes start a cluster of one name in one project; a
# stop from an empty home deletes nothing, `--id` exactly one, each stop
# leaves the other whole; one Cloud NAT serves both, the last stop deletes it.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/two-homes.sh"
