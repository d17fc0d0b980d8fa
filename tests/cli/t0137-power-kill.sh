#!/bin/sh
# t0137-power-kill.sh - the resume program killed with SIGKILL
# (docs/power-saving.md) at three points: its node marked waking
# before anything is made (power:1), the node's processes made before the
# bootstrap (start:1), bootstrapped before SLURM sees it (start:2).  Each
# time SLURM's next resume of the node goes on and the node runs a job; at
# the end `pbx cluster stop` leaves no process and no file of the cluster.
# PBX_TEST_KILL_AT (src/util/testkill.h) raises SIGKILL in pbx itself,
# exactly as `kill -9` would, at the named point.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster pk slot "{ name: node, count: 1, min: 0, cpus: 2 }" \
	"slurm: { suspend_time: 1h, resume_timeout: 120s }"
CDIR="$PBX_HOME/clusters/pk"
node_state() { sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM nodes WHERE name = '$1'"; }

run_pbx cluster start pk
ok $rc "a cluster with min: 0 starts: $errout"
is "$(node_state node1)" "asleep" "node1 is asleep"

# kill_at POINT STATE PROCS: the resume killed at POINT leaves node1 in
# STATE with (PROCS = some) or without (none) processes
kill_at() {
	PBX_TEST_KILL_AT=$1 "$PBX" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
	is "$?" "137" "the resume killed at $1 (SIGKILL)"
	is "$(node_state node1)" "$2" "killed at $1: node1 is $2 in the store"
	n=$(body_procs node1)
	case $3:$n in none:0 | some:[1-9]*) r=0 ;; *) r=1 ;; esac
	ok $r "killed at $1: node1 has $3 processes ($n)"
	# SLURM's next resume of it (ResumeProgram runs again)
	run_pbx cluster power pk resume node1
	ok $rc "the next resume after a kill at $1 goes on: $errout"
	is "$(node_state node1)" "up" "node1 is up"
	[ "$(body_procs node1)" -gt 0 ]
	ok $? "its processes run"
	# back to sleep for the next point
	run_pbx cluster power pk suspend node1
	ok $rc "suspend: $errout"
	is "$(node_state node1):$(body_procs node1)" "asleep:0" "node1 asleep again, no process"
}
kill_at power:1 waking none
kill_at start:1 waking some
kill_at start:2 bootstrapping some

# the same for `pbx cluster start` itself, killed and run again
for p in start:1 start:2; do
	run_pbx cluster stop --discard-results pk
	PBX_TEST_KILL_AT=$p "$PBX" -q cluster start pk >"$TEST_TMP/k.out" 2>&1
	is "$?" "137" "cluster start killed at $p (SIGKILL)"
	run_pbx cluster start pk
	ok $rc "start again after a kill at $p: $errout"
	is "$(node_states)" "head:up node1:asleep" "head up, node1 asleep"
done

run_pbx cluster stop --discard-results pk
ok $rc "stop: $errout"
is "$(ps -eo args= | grep -F "$CDIR/" | grep -cv grep)" "0" "no process of the cluster is left"
[ ! -e "$CDIR" ]
ok $? "no file of the cluster is left: $(ls "$CDIR" 2>&1 | head -3)"
done_testing
