#!/bin/sh
# task_user_race.sh - templates/bootstrap/40-task-user.sh's task_user_make
# when node bodies' bootstraps run at once on one host (the local cluster):
# another bootstrap makes the task user between this one's look for the
# name and its look for the uid.  That is the same user, not a clash (a
# clean-root demo failed so: "uid 2850 ... is pbx-task's here").  A uid
# held by another user is still refused.  getent, useradd and die are
# stand-ins; the function is the stage's own, cut out of the file.
set -u
SRC=${1:?usage: task_user_race.sh SOURCE_DIR}
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"
T=$(mktemp -d /tmp/pbx-taskuser.XXXXXX)
trap 'rm -rf "$T"' EXIT
sed -n '/^TASK_USER=/p; /^TASK_UID=/p; /^task_user_make() {/,/^}/p' "$SRC/templates/bootstrap/40-task-user.sh" >"$T/fn.sh"
grep -q '^task_user_make() {' "$T/fn.sh"
ok $? "task_user_make cut out of 40-task-user.sh"

# scenario OWNER: `getent passwd pbx-task` finds nothing (the look before
# the other bootstrap's useradd), `getent passwd 2850` finds OWNER
# shellcheck disable=SC2317 # the stand-ins are called by task_user_make
scenario() {
	(
		# shellcheck disable=SC1091 # cut out above
		. "$T/fn.sh"
		getent() { [ "$2" = 2850 ] && [ -n "$1" ] && echo "$OWNER:x:2850:2850::/home/$OWNER:/bin/sh"; }
		useradd() { echo useradd >>"$T/calls"; return 1; }
		die() { echo "die: $*" >>"$T/calls"; exit 1; }
		log() { :; }
		sleep() { :; }
		OWNER=$1 task_user_make
	)
}
: >"$T/calls"
scenario pbx-task
ok $? "the uid taken by pbx-task itself (made meanwhile by another node body): no error"
is "$(cat "$T/calls")" "" "  and no useradd"
: >"$T/calls"
scenario alice
r=$?
[ $r != 0 ] && grep -q "die: uid 2850, which pbx's task user pbx-task has on every node, is alice's here" "$T/calls"
ok $? "the uid held by another user (alice) is refused: $(cat "$T/calls")"
done_testing
