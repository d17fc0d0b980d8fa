#!/bin/sh
# t0303-data-head.sh - cloud/data-head.sh on the Compute Engine emulator's
# node bodies: a head with a service account stages gs:// data itself with
# its metadata server's token; the user's pbx downloads nothing.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/data-head.sh"
