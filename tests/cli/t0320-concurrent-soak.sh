#!/bin/sh
# t0320-concurrent-soak.sh - `pbx state`, `pbx harvest --running` and
# `pbx report` in loops while three `pbx parrun`s record and submit their
# sweeps (two of them the same experiment at once) and `pbx rerun` runs:
# every command succeeds, none reports a sanitizer error (this test runs in
# the ASan/UBSan build too), no task is ever in a state outside the known
# set, every task of every sweep runs exactly once and completes.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster sk slot "{ name: node, count: 2, gpus: 0, cpus: 4 }"
SHARED="$PBX_HOME/clusters/sk/shared"
DB="$PBX_HOME/pbx.db"
KNOWN="'NEW','PENDING','RUNNING','COMPLETED','FAILED','CANCELLED','TIMEOUT','PREEMPTED','NODE_FAIL','OUT_OF_MEMORY','MISSING','UNKNOWN'"

run_pbx -q cluster start sk
ok $rc "cluster starts: $errout"

for e in a b; do
	mkdir -p "$TEST_TMP/$e"
	cat >"$TEST_TMP/$e/run.sh" <<'EOF'
sleep "0.$1"
echo "{\"step\": 1, \"v\": $1}" >metrics.jsonl
echo run >>ran
EOF
	cat >"$TEST_TMP/$e/experiment.yaml" <<EOF
name: soak-$e
command: sh ./run.sh {i}
sweep:
  grid:
    i: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
resources: { throttle: 6 }
EOF
done

: >"$TEST_TMP/bad"
STOP="$TEST_TMP/stop"
# loop NAME ARGS...: runs pbx ARGS until $STOP exists; a non-zero exit
# (other than 3: no experiment yet) or sanitizer output is logged in bad.
loop() {
	name=$1
	shift
	while [ ! -e "$STOP" ]; do
		"$PBX" -q "$@" >/dev/null 2>"$TEST_TMP/$name.err"
		lrc=$?
		if { [ $lrc -ne 0 ] && [ $lrc -ne 3 ]; } ||
			grep -q "Sanitizer\|runtime error" "$TEST_TMP/$name.err"; then
			echo "$name exit $lrc: $(head -c 300 "$TEST_TMP/$name.err")" >>"$TEST_TMP/bad"
		fi
		bad_states=$(sqlite3 "$DB" "SELECT count(*) FROM tasks WHERE state NOT IN ($KNOWN)" 2>/dev/null)
		[ "${bad_states:-0}" = 0 ] || echo "$name: $bad_states tasks in unknown states" >>"$TEST_TMP/bad"
	done
}
loop state state &
p1=$!
loop harvest harvest --running &
p2=$!
loop report report &
p3=$!

submit() { # submit NAME EXPERIMENT: parrun, logging failures
	"$PBX" -q parrun --json "$2" sk >"$TEST_TMP/$1.out" 2>"$TEST_TMP/$1.err" ||
		echo "parrun $1 exit $?: $(head -c 300 "$TEST_TMP/$1.err")" >>"$TEST_TMP/bad"
	! grep -q "Sanitizer\|runtime error" "$TEST_TMP/$1.err" || echo "parrun $1: sanitizer" >>"$TEST_TMP/bad"
}
submit a1 "$TEST_TMP/a/experiment.yaml" &
s1=$!
submit a2 "$TEST_TMP/a/experiment.yaml" &
s2=$!
submit b1 "$TEST_TMP/b/experiment.yaml" &
s3=$!
wait $s1 $s2 $s3
if [ -s "$TEST_TMP/bad" ]; then   # no point waiting for sweeps that were never submitted
	touch "$STOP"
	wait $p1 $p2 $p3
	is "$(cat "$TEST_TMP/bad")" "" "the three parruns succeed"
	done_testing
fi
PA=$(sqlite3 "$DB" "SELECT short_id FROM packages WHERE name = 'soak-a'")
PB=$(sqlite3 "$DB" "SELECT short_id FROM packages WHERE name = 'soak-b'")
"$PBX" -q rerun --failed "$PA" >/dev/null 2>"$TEST_TMP/rerun.err" ||
	echo "rerun exit $?: $(cat "$TEST_TMP/rerun.err")" >>"$TEST_TMP/bad"
wait_final "$PA" 180
ok $? "sweep a ends"
wait_final "$PB" 180
ok $? "sweep b ends"
sleep 2
touch "$STOP"
wait $p1 $p2 $p3

is "$(cat "$TEST_TMP/bad")" "" "no command failed, no sanitizer report, no unknown state"
run_pbx state --json "$PA"
is "$(echo "$out" | json_get 'd["counts"]')" "{'COMPLETED': 15}" "every task of a completed"
run_pbx state --json "$PB"
is "$(echo "$out" | json_get 'd["counts"]')" "{'COMPLETED': 15}" "every task of b completed"
runs=$(cat "$SHARED"/pbx/"$PA"/tasks/*/ran "$SHARED"/pbx/"$PB"/tasks/*/ran | wc -l)
is "$runs" "30" "each of the 30 tasks ran exactly once, though a was submitted twice at once"
# the loops may stop before they see the last tasks end: a last plain
# harvest brings what they left (both packages: none is home whole yet)
run_pbx harvest --json
ok $rc "a last harvest: $errout"
is "$(sqlite3 "$DB" "SELECT count(*) FROM metrics")" "30" "30 metric points, each once"
done_testing
