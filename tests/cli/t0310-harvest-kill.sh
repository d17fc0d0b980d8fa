#!/bin/sh
# t0310-harvest-kill.sh - `pbx harvest` killed with SIGKILL at ten points
# (during the transfer, while placing files, while ingesting metrics), each
# followed by harvests to the end: every file byte-identical to the
# cluster's, every metric point in the store exactly once, never a file
# counted as harvested without its metrics, never a partial file in place,
# and the transfer after a kill smaller than the whole when the killed one
# had finished files.  Also: metrics an older pbx recorded without their
# points are ingested by the next harvest; an empty .incoming is removed; a
# harvest interrupted by SIGINT (Ctrl-C) says the next one fetches the rest.
# The kill points come from PBX_TEST_KILL_AT (src/jobs/harvest.c), which
# raises SIGKILL in pbx itself, exactly as `kill -9` would; one more kill
# comes from outside while the stream is under way.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster hk slot "{ name: node, count: 2, gpus: 0, cpus: 4 }"
SHARED="$PBX_HOME/clusters/hk/shared"
RESULTS="$PBX_HOME/results"
DB="$PBX_HOME/pbx.db"
NTASKS=40
STEPS=100

run_pbx -q cluster start hk
ok $rc "cluster starts: $errout"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EOF'
name: harvest-kill
command: >
  echo {t} > t.txt && i=0 && while [ $i -lt 100 ]; do
  echo "{\"step\": $i, \"loss\": 1.$i, \"acc\": 0.$i}"; i=$((i + 1)); done > metrics.jsonl &&
  head -c 1000000 /dev/urandom > out.bin
sweep:
  grid:
    t: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
        20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39]
outputs: [out.bin, t.txt]
EOF
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" hk
ok $rc "parrun: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG" 120
ok $? "the $NTASKS tasks end"
is "$(json_get 'd["counts"]' <"$TEST_TMP/state.json")" "{'COMPLETED': $NTASKS}" "all complete"

# The files in place (outside .incoming) that differ from the cluster's.
differing() {
	(cd "$RESULTS/$PKG" 2>/dev/null && find . -type f ! -path './.incoming/*' | sort) | while read -r f; do
		cmp -s "$RESULTS/$PKG/$f" "$SHARED/pbx/$PKG/tasks/$f" || echo "differs: $f"
	done
}
# Tasks whose metrics.jsonl counts as harvested without its points.
unmatched() {
	sqlite3 "$DB" "SELECT count(*) FROM harvested h WHERE path = 'metrics.jsonl' AND NOT EXISTS
		(SELECT 1 FROM metrics m WHERE m.submission_id = h.submission_id AND m.idx = h.idx)"
}
metric_rows() { sqlite3 "$DB" "SELECT count(*) FROM metrics"; }
reset_home() {
	rm -rf "${RESULTS:?}/$PKG"
	sqlite3 "$DB" "DELETE FROM harvested; DELETE FROM metrics"
}

# A full harvest from nothing: the size of the whole.
run_pbx harvest --json "$PKG"
ok $rc "a full harvest: $errout"
WHOLE=$(echo "$out" | json_get 'd[0]["bytes"]')
is "$(metric_rows)" "$((NTASKS * STEPS * 2))" "every metric point is in the store"
[ "$WHOLE" -gt 40000000 ]
ok $? "the whole is $WHOLE bytes"

# killed_harvest POINT: a harvest that kills itself at POINT (or, for
# "outside", is killed by the test while it streams); checks what it left.
killed_harvest() {
	if [ "$1" = outside ]; then
		pbx_bg harvest "$PKG"
		wait_bg 400 0.01 incoming_over "$PKG" 4000000
		kill9
	else
		PBX_TEST_KILL_AT=$1 "$PBX" -q harvest "$PKG" >/dev/null 2>&1
		krc=$?
	fi
	is "$krc" "137" "killed at $1 (SIGKILL)"
	is "$(differing)" "" "after the kill at $1, every file in place is whole and the cluster's"
	is "$(unmatched)" "0" "after the kill at $1, no metrics.jsonl counts as harvested without its points"
}

# finish_harvest POINT: the harvest to the end after the kill(s) at POINT.
finish_harvest() {
	run_pbx harvest --json "$PKG"
	ok $rc "after $1, the next harvest ends: $errout"
	last=$(echo "$out" | json_get 'd[0]["bytes"]')
	is "$(differing)" "" "after $1, every file is byte-identical to the cluster's"
	is "$(find "$RESULTS/$PKG" -mindepth 2 -maxdepth 2 -type f | wc -l)" "$((NTASKS * 7))" \
		"after $1, every task has its 7 files"
	is "$(metric_rows)" "$((NTASKS * STEPS * 2))" "after $1, every metric point is in the store exactly once"
	[ ! -e "$RESULTS/$PKG/.incoming" ]
	ok $? "after $1, no .incoming is left"
}

# Transfer: four kills in a row, each resuming the last; then the end.
reset_home
for point in outside stream:3000000 stream:8000000 stream:12000000; do
	killed_harvest $point
done
finish_harvest "four kills during the transfer"
[ "$last" -lt "$WHOLE" ]
ok $? "the transfer after the kills ($last bytes) is smaller than the whole ($WHOLE)"

# Placing files and ingesting metrics: each kill from nothing, then the end.
for point in install:5 install:120 install:250 ingest:1 ingest:20 ingest:40; do
	reset_home
	killed_harvest $point
	finish_harvest "the kill at $point"
	[ "$last" -lt "$WHOLE" ]
	ok $? "after the kill at $point, $last bytes fetched, less than the whole ($WHOLE)"
done

# Ctrl-C while files are placed: the harvest says what it kept and that
# the next harvest fetches the rest, dies of the signal, and the next one does.
reset_home
PBX_TEST_KILL_AT=install:120:INT "$PBX" harvest "$PKG" >/dev/null 2>"$TEST_TMP/int.err"
is "$?" 130 "a harvest interrupted (SIGINT, as Ctrl-C) dies of it"
is "$(tail -n 1 "$TEST_TMP/int.err")" "pbx: harvest interrupted: every file that came whole is kept; 'pbx harvest' again fetches the rest" \
	"and says the next harvest fetches the rest"
is "$(differing)" "" "after the interrupt, every file in place is whole and the cluster's"
finish_harvest "the interrupt"

# A store in which an older pbx recorded metrics.jsonl files without their
# points (killed between its two transactions): the next harvest ingests them.
sqlite3 "$DB" "DELETE FROM metrics WHERE idx < 5"
is "$(unmatched)" "5" "five tasks' metrics are missing"
run_pbx harvest --json "$PKG"
ok $rc "harvest: $errout"
is "$(echo "$out" | json_get 'd[0]["bytes"], d[0]["metrics_added"]')" "0 $((5 * STEPS * 2))" \
	"it fetches nothing and ingests the missing points"
is "$(metric_rows)" "$((NTASKS * STEPS * 2))" "every metric point is in the store exactly once"
done_testing
