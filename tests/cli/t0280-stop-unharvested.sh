#!/bin/sh
# t0280-stop-unharvested.sh - `pbx cluster stop` never deletes results that
# are not home: with tasks that ended and were not harvested, or that have
# not ended, it refuses (exit 4), lists the packages and says how to bring
# them home; the cluster keeps running.  After `pbx harvest` (and `pbx
# cancel` of the task that would not end, then a harvest of what it left)
# the stop goes through.  Tasks that ended after the last `pbx state` are
# refreshed first (counted as ended, not running); --discard-results stops
# a cluster anyway.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster su slot "{ name: node, count: 2 }"
SHARED=$PBX_HOME/clusters/su/shared
mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: keep
command: "if [ {i} = 2 ]; then sleep 600; else echo r{i} >out.txt; fi"
sweep: { grid: { i: [0, 1, 2] } }
outputs: [out.txt]
EXP

run_pbx -q cluster start su
ok $rc "the cluster starts: $errout"
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" su
ok $rc "parrun: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
# two_done: tasks 0 and 1 have ended COMPLETED, as their status files say
two_done() { [ "$(cat "$SHARED/pbx/$pkg"/tasks/[01]/status 2>/dev/null | awk '{print $2}' | tr '\n' ' ')" = "COMPLETED COMPLETED " ]; }
wait_secs 120 two_done
ok $? "tasks 0 and 1 completed, task 2 runs"

# stop_refused WHAT WORDS: a stop exits 4 naming the package and WORDS
# (its message left in $refusal)
stop_refused() {
	run_pbx cluster stop su
	refusal=$errout
	is "$rc" 4 "$1: stop is refused (exit 4)"
	case $errout in *"cluster su holds results that are not home"*"$pkg  keep: $2"*"--discard-results su"*) r=0 ;; *) r=1 ;; esac
	ok $r "$1: it lists the package and what is not home: $errout"
	run_pbx cluster exec su -- true
	ok $rc "$1: the cluster still runs: $errout"
}
# the store last saw the tasks PENDING (no `pbx state` since the parrun):
# the stop refreshes them first
stop_refused "2 ended, 1 running" "2 ended, not harvested; 1 not ended"
case $refusal in *"'pbx harvest' brings the ended tasks' results home"*) r=0 ;; *) r=1 ;; esac
ok $r "and says that pbx harvest brings them home"

run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
stop_refused "1 running" "1 not ended"

run_pbx cancel "$pkg:2"
ok $rc "cancel of the task that would not end: $errout"
wait_final "$pkg" 60
is "$(task_states "$pkg")" "CANCELLED COMPLETED COMPLETED" "it is cancelled"
stop_refused "the cancelled task's files" "1 ended, not harvested"
run_pbx -q harvest "$pkg"
ok $rc "harvest of what it left: $errout"
is "$(cat "$PBX_HOME/results/$pkg"/*/out.txt | sort | tr '\n' ' ')" "r0 r1 " "the results are home"

# a second package: refused for it alone; once it is harvested too,
# nothing is lost and the stop goes through
sed 's/^name: keep$/name: more/; s/\[0, 1, 2\]/[0]/' "$TEST_TMP/exp/experiment.yaml" >"$TEST_TMP/exp/more.yaml"
run_pbx parrun "$TEST_TMP/exp/more.yaml" su
more=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$more" 60
run_pbx cluster stop su
is "$rc" 4 "a package not harvested: refused again"
case $errout in *"$more  more: 1 ended, not harvested"*) r=0 ;; *) r=1 ;; esac
[ "$r" = 0 ] && case $errout in *"$pkg  keep"*) r=1 ;; esac
ok $r "naming that package alone: $errout"
run_pbx -q harvest "$more"
ok $rc "its harvest: $errout"
run_pbx cluster stop su
ok $rc "with every result home, the stop goes through: $errout"
is "$(body_procs head)" 0 "no process of the cluster is left"
run_pbx log "$pkg:1"
case $rc:$errout in 0:*"cluster su is gone: the harvested copy ($PBX_HOME/results/$pkg/1)"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx log after the stop shows the harvested copy, saying so: $errout"
is "$(grep -c '^=== pbx task 1 attempt 1 node ' "$PBX_HOME/results/$pkg/1/stderr")" 1 "(its stderr is home)"
case $errout in *"=== pbx task 1 attempt 1 node "*) r=0 ;; *) r=1 ;; esac
ok $r "and the task's stderr from it"

# --discard-results: a new cluster's results are lost on purpose
run_pbx -q cluster start su
ok $rc "the cluster starts again: $errout"
sed 's/^name: more$/name: lost/' "$TEST_TMP/exp/more.yaml" >"$TEST_TMP/exp/lost.yaml"
run_pbx parrun "$TEST_TMP/exp/lost.yaml" su
lost=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$lost" 60
run_pbx cluster stop su
is "$rc" 4 "refused while its result is not home"
run_pbx cluster stop --discard-results su
ok $rc "stop --discard-results stops it anyway: $errout"
is "$(body_procs head)" 0 "no process of the cluster is left"
done_testing
