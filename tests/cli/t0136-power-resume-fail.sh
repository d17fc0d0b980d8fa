#!/bin/sh
# t0136-power-resume-fail.sh - a resume that fails (docs/power-saving.md):
# node2 of a group with min: 1 cannot be made (its
# SSH address is taken, as a cloud's stockout or quota would refuse it), so
# pbx-resume removes what it made, puts it back to sleep and marks it DOWN in
# SLURM with the reason; SLURM requeues the work, which all completes on
# node1; pbx does not loop making and removing node2.  Once the address is
# free and an operator resumes node2 in SLURM, a job wakes it.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster pf slot "{ name: node, count: 2, min: 1, cpus: 2 }" \
	"slurm: { suspend_time: 15s, resume_timeout: 120s }"
CDIR="$PBX_HOME/clusters/pf"
LOG="$CDIR/nodes/head/var/log/pbx-power.log"
sinfo_of() { "$PBX" cluster exec pf -- sinfo -h -n "$1" -N -o '%t|%E' 2>/dev/null; }

run_pbx cluster start pf
ok $rc "a cluster with min: 1 starts: $errout"
is "$(node_states)" "head:up node1:up node2:asleep" "node1 runs, node2 is asleep"
addr=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT address FROM nodes WHERE name = 'node2'")
case $addr in "$SLOT_NET".0.*) r=0 ;; *) r=1 ;; esac
ok $r "node2 has its loopback address planned: $addr"

# something else holds node2's SSH address: making node2 fails
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
open(sys.argv[3], "w").write("up")
time.sleep(3600)' "${addr%:*}" "$SSH_PORT" "$TEST_TMP/blocker.up" &
BLOCKER=$!
trap 'kill $BLOCKER 2>/dev/null; cleanup_cluster' EXIT
wait_for 100 test -s "$TEST_TMP/blocker.up"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/e.yaml" <<'EXP'
name: fail
command: "sleep 1 && echo done {i}"
sweep: { grid: { i: [1, 2, 3, 4] } }
EXP
run_pbx parrun "$TEST_TMP/exp/e.yaml" pf --cpus-per-task=2
ok $rc "4 tasks submitted (2 CPUs each: one at a time a node): $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
down() { case $(sinfo_of node2) in *"pbx resume failed"*) return 0 ;; esac; return 1; }
wait_for 1800 down
ok $? "SLURM has node2 down with pbx's reason: $(sinfo_of node2)"
wait_for 1800 queue_empty pf
ok $? "the queue empties with no pbx running here"
wait_final "$pkg" 60
is "$(task_states "$pkg")" \
	"COMPLETED COMPLETED COMPLETED COMPLETED" "every task completed"
is "$(task_nodes "$pkg")" "node1" \
	"all on node1, the node that exists"
is "$(node_states)" "head:up node1:up node2:asleep" "the store has node2 asleep again"
case $(sinfo_of node2) in "down~|pbx resume failed: "* | "down%|pbx resume failed: "*) r=0 ;; *) r=1 ;; esac
ok $r "SLURM has it down and powered (or powering) off, pbx's reason kept: $(sinfo_of node2)"
is "$(body_procs node2)" "0" "no process of node2 is left"
resumes=$(grep -c " resume " "$LOG" 2>/dev/null)
[ "$resumes" -ge 1 ] && [ "$resumes" -le 2 ]
ok $? "pbx-resume ran $resumes time(s): no loop of making and removing node2 ($(tail -3 "$LOG" 2>/dev/null | tr '\n' ' '))"
case $(cat "$LOG") in *"resume node2"*"error"*) r=0 ;; *) r=1 ;; esac
ok $r "the head's pbx-power.log says the resume failed"

# the address is free again; the operator resumes node2 in SLURM
kill $BLOCKER 2>/dev/null
wait $BLOCKER 2>/dev/null
run_pbx cluster exec pf -- scontrol update nodename=node2 state=resume
ok $rc "scontrol resumes node2: $errout"
run_pbx cluster exec pf -- srun -N1 -w node2 -c2 hostname
ok $rc "a job on node2 wakes it and runs: $out $errout"
is "$(node_states)" "head:up node1:up node2:up" "node2 is up"

run_pbx cluster stop --discard-results pf
ok $rc "stop: $errout"
is "$(ps -eo args= | grep -F "$CDIR/" | grep -cv grep)" "0" "no process of the cluster is left"
done_testing
