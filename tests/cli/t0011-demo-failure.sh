#!/bin/sh
# t0011-demo-failure.sh - a scripts/demo.sh that fails part-way stops the
# cluster it started (no sshd, munged, slurmctld or slurmd left, no port)
# and prints the command that does it; so does a demo sent TERM while it
# runs; with --keep it leaves the cluster up and prints the same command.  Where `unshare -m` works, the demo in a
# mount namespace without /sys/fs/cgroup (a chroot, a container) fails with
# the one-line reason, and cleans up too.
# The demo's cluster `local` is redefined with GPU-less nodes, so its
# `pbx parrun ... --gres=gpu:1` step fails.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster local slot "{ name: node, count: 2, gpus: 0 }"
CDIR="$PBX_HOME/clusters/local"
STOP="PBX_HOME=$PBX_HOME $PBX cluster stop local"

ports_left() {
	ss -Hltn | awk '{print $4}' | grep -Ec '^127\.0\.89\.|:(217[3-8][0-9]|2179[0-3])$'
}

# demo [ARGS]: runs scripts/demo.sh with this test's pbx; output in
# $TEST_TMP/demo.out (both streams), status in $rc.
demo() {
	rc=0
	env PBX="$PBX" "$@" sh "$PBX_SOURCE_DIR/scripts/demo.sh" $DEMO_ARGS >"$TEST_TMP/demo.out" 2>&1 || rc=$?
}

DEMO_ARGS=
demo
[ "$rc" -ne 0 ]
ok $? "the demo fails at parrun --gres=gpu:1 on GPU-less nodes (exit status $rc)"
grep -q '^== pbx parrun' "$TEST_TMP/demo.out" && ! grep -q '^== pbx state' "$TEST_TMP/demo.out"
ok $? "it got as far as parrun"
grep -qxF "    $STOP --discard-results" "$TEST_TMP/demo.out"
ok $? "it prints the command that stops the cluster (its results discarded): $(grep -A1 'demo.sh:' "$TEST_TMP/demo.out" | tr '\n' ' ')"
is "$(procs_mentioning "$CDIR/")" "" "no process of the cluster is left"
is "$(ports_left)" "0" "no port of the cluster is left"
[ ! -e "$CDIR" ]
ok $? "the cluster's directory is gone"

DEMO_ARGS=--keep
demo
[ "$rc" -ne 0 ] && grep -q 'the cluster keeps running (--keep)' "$TEST_TMP/demo.out"
ok $? "with --keep, a failed demo says the cluster keeps running"
grep -qxF "    $STOP" "$TEST_TMP/demo.out"
ok $? "... and prints the command that stops it"
[ -n "$(procs_mentioning "$CDIR/")" ]
ok $? "... and the cluster runs"
run_pbx cluster stop local
# shellcheck disable=SC2154 # errout: set by run_pbx
ok $rc "the printed command stops it: $errout"
is "$(procs_mentioning "$CDIR/")" "" "no process of the cluster is left after it"
DEMO_ARGS=

# A demo stopped while it runs (TERM to its process group, as a terminal's
# Ctrl-C reaches all of it; INT cannot be sent here: a background job
# ignores it) stops the cluster too.  GPU nodes now, so the demo runs on
# into `pbx state --watch`.
local_cluster local slot "{ name: node, count: 2, gpus: 2 }"
env PBX="$PBX" setsid sh "$PBX_SOURCE_DIR/scripts/demo.sh" >"$TEST_TMP/demo.out" 2>&1 &
demo_pid=$!
i=0
until grep -q '^== pbx state --watch' "$TEST_TMP/demo.out" || [ "$i" -ge 600 ]; do
	sleep 0.1
	i=$((i + 1))
done
is "$(ps -o pgid= -p "$demo_pid" | tr -d ' ')" "$demo_pid" "the demo runs in a process group of its own"
/bin/kill -s TERM -- "-$demo_pid"
rc=0
wait "$demo_pid" || rc=$?
is "$rc" 143 "a demo sent TERM during pbx state --watch exits 143"
grep -qxF "    $STOP --discard-results" "$TEST_TMP/demo.out"
ok $? "... prints the command that stops the cluster"
is "$(procs_mentioning "$CDIR/")" "" "... and no process of the cluster is left"
is "$(ports_left)" "0" "... nor a port"

if unshare -m true 2>/dev/null; then
	demo unshare -m sh "$PBX_SOURCE_DIR/tests/common/no-cgroup.sh"
	[ "$rc" -ne 0 ] && [ "$rc" -ne 97 ]
	ok $? "without /sys/fs/cgroup the demo fails (exit status $rc)"
	grep -q '^  node node1: .*: slurmd needs a cgroup filesystem at /sys/fs/cgroup and none is mounted (in a chroot: mount --rbind' "$TEST_TMP/demo.out"
	ok $? "... saying why in one line: $(grep 'node node1' "$TEST_TMP/demo.out")"
	is "$(procs_mentioning "$CDIR/")" "" "... and no process of the cluster is left"
	is "$(ports_left)" "0" "... nor a port"
else
	echo "# unshare -m is not permitted here: the demo without /sys/fs/cgroup is not run"
fi
done_testing
