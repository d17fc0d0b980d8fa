#!/bin/sh
# t0451-gce-autostop-delete.sh - cloud/autostop-delete.sh on the Compute
# Engine emulator: autostop_action: delete; the idle cluster stops while
# results are not harvested, and once they are, the head deletes it with
# its service account's token, itself last.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/autostop-delete.sh"
