#!/bin/sh
# t0140-autostop.sh - autostop on the local provider (docs/autostop.md):
# the head's pbx-autostop (templates/autostop.sh) waits while a SLURM job
# runs and while an SSH session is open, then, after `autostop` idle,
# asks the compute nodes to power off and powers off itself: no process of
# the cluster is left, its directories (the disks) stay, the head records
# why; `cluster show` and `cluster exec` say the cluster is stopped and how
# to start it; `cluster start` brings it back with the same files and a job
# runs.  `--autostop` is checked and recorded; `off` stops the watchers.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster as slot "{ name: node, count: 2 }" "autostop: 12s"
export PBX_AUTOSTOP_TICK=1   # the watchers look every second (default 10)
CDIR="$PBX_HOME/clusters/as"
# the watchers of this cluster: not their momentary forks (a command
# substitution's subshell shows its watcher's command line until it execs)
watchers() {
	ps -eo pid=,ppid=,args= | grep -F "$CDIR/" | grep "[p]bx-autostop watch" |
		awk '{ pid[$1] = 1; parent[$1] = $2 } END { n = 0; for (p in pid) if (!(parent[p] in pid)) n++; print n }'
}

run_pbx cluster start as --autostop soon
is "$rc" 2 "--autostop with a word that is no duration is a usage error"
echo "$errout" | grep -q "'soon' is not a duration"
ok $? "the message quotes the value: $errout"
run_pbx cluster start as --autostop 5s
is "$rc" 2 "--autostop below 10 s is refused"
[ ! -d "$CDIR" ]
ok $? "a refused start made nothing"

run_pbx -q cluster start as --autostop 1h
ok $rc "the cluster starts: $errout"
is "$(watchers)" 3 "a pbx-autostop watcher runs on each of the 3 nodes"
run_pbx cluster show as
echo "$out" | grep -q "autostop: after 1h idle"
ok $? "show says when it will stop: $(echo "$out" | sed -n 3p)"

# busy: a job (it runs until TEST_TMP/go exists) keeps it up past the idle
# time; the watchers restart with 12 s while it runs
run_pbx cluster exec as -- sbatch -N1 --wrap "while [ ! -e $TEST_TMP/go ]; do sleep 1; done"
ok $rc "a job is submitted: $out $errout"
JOBID=${out##* }
run_pbx -q cluster start as --autostop 12s
ok $rc "start --autostop 12s while it runs: $errout"
sleep 16
is "$(watchers)" 3 "16 s later (more than 12 s), the job keeps every node up"
# an open SSH session keeps it up too
"$PBX" cluster exec as -- sleep 30 >/dev/null 2>&1 &
SESSION=$!
# open (the head's sshd has it, as pbx-autostop counts sessions) before
# the job ends, and the job gone before the 16 s count
sessions() {
	top=$(cat "$CDIR/nodes/head/run/sshd.pid" 2>/dev/null)
	ps -eo pid=,ppid=,args= | awk -v top="${top:-none}" '{ parent[$1] = $2; line[$1] = $0 }
		END { n = 0
			for (p in parent) {
				if (line[p] !~ /^ *[0-9]+ +[0-9]+ +sshd: [^ ]+@/) continue
				for (q = parent[p]; q != "" && q != 0 && q != 1; q = parent[q]) if (q == top) { n++; break }
			}
			print n }'
}
has_session() { [ "$(sessions)" -ge 1 ]; }
wait_secs 60 has_session
ok $? "the SSH session is open"
touch "$TEST_TMP/go"
wait_secs 60 job_gone as "$JOBID"
ok $? "the job (${JOBID}) ends"
sleep 16
is "$(watchers)" 3 "the job over for 16 s, an open SSH session keeps it up"
kill "$SESSION" 2>/dev/null; wait "$SESSION" 2>/dev/null
# the session gone: stopped within 12 s idle + a few seconds of shutdown
i=0
while [ -n "$(procs_mentioning "$CDIR/")" ] && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
is "$(procs_mentioning "$CDIR/")" "" "after the session ends and 12 s idle, no process of the cluster is left (${i} s)"
[ -d "$CDIR/nodes" ] && [ -f "$CDIR/nodes/head/etc/slurm/slurm.conf" ]
ok $? "its directories (the nodes' disks) are kept"
grep -q "^reason=idle for 12 s (autostop)" "$CDIR/nodes/head/var/lib/pbx/autostop.last"
ok $? "the head recorded why: $(cat "$CDIR/nodes/head/var/lib/pbx/autostop.last" 2>&1 | tr '\n' ' ')"
for n in node1 node2; do
	grep -q "the head asks to power off" "$CDIR/nodes/$n/var/log/pbx-autostop.log"
	ok $? "$n powered off on the head's request"
done

run_pbx cluster show as
echo "$errout" | grep -q "cluster as is stopped: stopped itself at .*: idle for 12 s (autostop).*pbx cluster start as"
ok $? "show says it is stopped, why, and the command that starts it: $errout"
run_pbx cluster show --json as
is "$(echo "$out" | json_get 'd["autostop"], d["reachable"], d["stopped"] is not None')" "12 False True" \
	"show --json: autostop 12, unreachable, stopped with a reason"
run_pbx cluster exec as -- hostname
is "$rc" 1 "exec on the stopped cluster fails"
echo "$errout" | grep -q "is stopped.*start it again with 'pbx cluster start as'"
ok $? "and says it is stopped and how to start it: $errout"

# start again: the same disks, SLURM back, a job runs, the watchers back.
# A shutdown is still under way (autostop's watcher ends last, seconds
# after sshd; here a process in the head's disk for 3 s): the start waits
# for the body's last process before its sshd starts again
echo kept >"$CDIR/nodes/node1/kept.txt"
(cd "$CDIR/nodes/head" && sleep 3 && date +%s.%N >"$TEST_TMP/halted") &
LINGER=$!
sleep 0.2
run_pbx -q cluster start as --autostop 1h
ok $rc "start brings the stopped cluster back: $errout"
wait "$LINGER"
python3 -c 'import os, sys; sys.exit(0 if os.stat(sys.argv[1]).st_mtime >= float(open(sys.argv[2]).read()) else 1)' \
	"$CDIR/nodes/head/run/sshd.pid" "$TEST_TMP/halted"
ok $? "the head's sshd started after the body's last process ended"
is "$(cat "$CDIR/nodes/node1/kept.txt" 2>&1)" "kept" "node1's disk is the one it had"
run_pbx cluster exec as -- srun -N2 hostname
ok $rc "a job runs on both compute nodes again: $errout"
is "$(watchers)" 3 "the watchers run again"
run_pbx cluster show --json as
is "$(echo "$out" | json_get 'd["autostop"]')" 3600 "--autostop 1h is recorded with the cluster"
run_pbx -q cluster start as
is "$(grep -c "PBX_AUTOSTOP_S='3600'" "$CDIR/nodes/head/etc/pbx/autostop.conf")" 1 \
	"a later start without --autostop keeps the recorded 1h"
# the head's record is text a node wrote: shown with its controls escaped
printf 'stopped_at=2026-01-01T00:00:00Z\nreason=\033]0;pwned\007 idle\n' \
	>"$CDIR/nodes/head/var/lib/pbx/autostop.last"
run_pbx cluster show as
printf '%s' "$out" | grep -q "$(printf '\033')"
is "$?" 1 "a hostile record puts no escape character on the terminal"
echo "$out" | grep -qF 'last: stopped itself at 2026-01-01T00:00:00Z: \x1b]0;pwned\x07 idle'
ok $? "it is shown escaped: $(echo "$out" | grep last:)"
run_pbx -q cluster start as --autostop off
ok $rc "--autostop off: $errout"
is "$(ps -eo args= | grep -F "$CDIR/nodes/head/" | grep -c "[p]bx-autostop watch")" 0 \
	"off: the head runs no watcher"

run_pbx -q cluster stop --discard-results as
ok $rc "stop: $errout"
is "$(procs_mentioning "$CDIR/")" "" "nothing of the cluster is left"
done_testing
