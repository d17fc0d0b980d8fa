#!/bin/sh
# t0300-harvest.sh - harvest on a real local cluster: incremental (a
# harvest while tasks run plus one after gives the same files as the
# cluster holds; a second harvest moves nothing and adds no metric);
# metrics ingested once; hostile task trees (links to /etc, links climbing
# out, a name with a newline) write nothing outside the results directory;
# a harvest cut part-way (remote tar killed, then pbx killed) resumes and
# ends byte-identical (SHA-256) with no partial file ever in place.
. "$(dirname "$0")/lib.sh"

local_cluster hv slot "{ name: node, count: 2, gpus: 2 }"
SHARED="$PBX_HOME/clusters/hv/shared"
RESULTS="$PBX_HOME/results"
# Every harvested file equals the cluster's copy: prints the mismatches.
compare_tree() {
	(cd "$RESULTS/$1" && find . -type f ! -path './.incoming/*' | sort) | while read -r f; do
		cmp -s "$RESULTS/$1/$f" "$SHARED/pbx/$1/tasks/$f" || echo "differs: $f"
	done
}

run_pbx -q cluster start hv
ok $rc "cluster starts: $errout"

# --- incremental harvest of the 24-task sweep ------------------------------
DEMO="$PBX_SOURCE_DIR/templates/experiments/sweep-demo/experiment.yaml"

run_pbx parrun --json "$DEMO" hv --gres=gpu:1
PKG=$(echo "$out" | json_get 'd["package"]')
sleep 2
run_pbx harvest --running --json "$PKG"
ok $rc "harvest --running while tasks run: $errout"
wait_final "$PKG" 120
ok $? "the sweep ends"
run_pbx harvest --json "$PKG"
ok $rc "harvest after the end: $errout"
first_metrics=$(echo "$out" | json_get 'd[0]["metrics_added"]')
is "$(compare_tree "$PKG")" "" "every harvested file equals the cluster's copy"
n=$(find "$RESULTS/$PKG" -mindepth 2 -maxdepth 2 \( -name metrics.jsonl -o -name result.txt -o -name status -o -name stdout -o -name params.json \) | wc -l)
is "$n" "120" "each of the 24 tasks has status, stdout, params.json, metrics.jsonl and result.txt"
run_pbx harvest --json "$PKG"
is "$(echo "$out" | json_get 'd[0]["files"], d[0]["bytes"], d[0]["metrics_added"]')" "0 0 0" \
	"a second harvest transfers nothing and adds no metric"
rows=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM metrics")
is "$rows" "$((24 * 50 * 2))" "24 tasks x 50 steps x 2 metrics in the store ($first_metrics added at the end)"
# A cluster whose head does not delete it (autostop_action: delete; not on
# the local cloud) gets no harvested mark: no round trip for it (t0451
# checks the one a deleting head reads).
[ -z "$(find "$PBX_HOME" -path '*/var/lib/pbx/harvested*')" ] && [ ! -e "$SHARED/pbx/$PKG/.pbx-harvested" ]
ok $? "no harvested mark on a cluster that does not delete itself"
export PBX_STATS=1
run_pbx harvest "$PKG"
unset PBX_STATS
is "$(echo "$errout" | sed -n 's/^pbx: stats: \([0-9]*\) ssh round trips.*$/\1/p')" 1 \
	"a harvest that moves nothing takes one SSH round trip: $errout"

# --- a task that ends in the second its RUNNING status came home -------------
# The status written at the start is given an mtime past the task's end, as
# when a harvest --running takes it and the task ends within that second:
# a plain harvest must still take the package as unharvested and bring the
# final status and the metrics (a CI soak run once lost two tasks' metrics).
mkdir -p "$TEST_TMP/quick"
cat >"$TEST_TMP/quick/experiment.yaml" <<'EOF'
name: quick-end
command: >
  while [ ! -e go ]; do sleep 0.1; done;
  echo '{"step": 1, "v": 7}' > metrics.jsonl
EOF
run_pbx parrun --json "$TEST_TMP/quick/experiment.yaml" hv
QPKG=$(echo "$out" | json_get 'd["package"]')
QDIR="$SHARED/pbx/$QPKG/tasks/0"
wait_secs 60 task_running "$QDIR"
ok $? "the task runs"
run_pbx state "$QPKG"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT t.state FROM tasks t JOIN submissions s ON s.id = t.submission_id JOIN packages p ON p.id = s.package_id WHERE p.short_id = '$QPKG'")" \
	RUNNING "pbx state saw it RUNNING"
touch -d "@$(($(date +%s) + 600))" "$QDIR/status"
run_pbx harvest --running "$QPKG"
ok $rc "harvest --running takes the RUNNING status: $errout"
touch "$QDIR/go"
task_done() { [ "$(cut -d' ' -f2 "$1/status" 2>/dev/null)" = COMPLETED ]; }
wait_secs 60 task_done "$QDIR"
ok $? "the task ends"
run_pbx harvest --json
ok $rc "a plain harvest of every package: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT t.state || ' ' || t.exit_code FROM tasks t JOIN submissions s ON s.id = t.submission_id JOIN packages p ON p.id = s.package_id WHERE p.short_id = '$QPKG'")" \
	"COMPLETED 0" "the harvest told the store what the status file says (no pbx state since)"
is "$(echo "$out" | json_get '[p["metrics_added"] for p in d if p["package"] == "'"$QPKG"'"]')" "[1]" \
	"it harvests the package again and ingests the task's metric"
is "$(cut -d' ' -f2 "$RESULTS/$QPKG/0/status")" "COMPLETED" "the final status is home"

# --- hostile task trees -----------------------------------------------------
mkdir -p "$TEST_TMP/hostile"
cat >"$TEST_TMP/hostile/experiment.yaml" <<'EOF'
name: hostile-tree
command: >
  ln -s /etc etc-link && ln -s ../../../.. up && mkdir -p d && ln -s /etc/passwd d/passwd &&
  ln -s ok.txt inside-link && printf ok > ok.txt && printf nl > "$(printf 'new\nline')"
outputs: ["*", "d/*"]
EOF
run_pbx parrun --json "$TEST_TMP/hostile/experiment.yaml" hv
HPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$HPKG" 60
tree_outside_results >"$TEST_TMP/before"
run_pbx harvest --json "$HPKG"
ok $rc "harvest of a hostile tree succeeds: $errout"
is "$(echo "$out" | json_get 'd[0]["refused"]')" "3" "three links leaving the task directory are refused"
echo "$errout" | grep -q "refused task 0 link 'etc-link' -> '/etc'"
ok $? "the refusals are reported"
tree_outside_results >"$TEST_TMP/after"
is "$(diff "$TEST_TMP/before" "$TEST_TMP/after")" "" "nothing written outside the results directory"
[ ! -e "$RESULTS/$HPKG/0/etc-link" ] && [ ! -e "$RESULTS/$HPKG/0/up" ] && [ ! -e "$RESULTS/$HPKG/0/d/passwd" ]
ok $? "the refused links are not in the results"
[ "$(cat "$RESULTS/$HPKG/0/new
line")" = nl ] && [ -L "$RESULTS/$HPKG/0/inside-link" ]
ok $? "a name with a newline and a link inside the task arrive"

# --- a harvest cut part-way resumes -------------------------------------------
mkdir -p "$TEST_TMP/big"
cat >"$TEST_TMP/big/experiment.yaml" <<'EOF'
name: big-output
command: head -c 200000000 /dev/urandom > big.bin && head -c 1000 /dev/urandom > small.bin
outputs: ["*.bin"]
EOF
run_pbx parrun --json "$TEST_TMP/big/experiment.yaml" hv
BPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$BPKG" 120
# Cut 1: the sending tar dies part-way through big.bin.
( "$PBX" -q harvest "$BPKG" >"$TEST_TMP/cut1.out" 2>&1; echo $? >"$TEST_TMP/cut1.rc" ) &
bg_pid=$!
wait_bg 200 0.05 incoming_over "$BPKG" 50000000
pkill -9 -f "tar -C .*/pbx/$BPKG/tasks --null" 2>/dev/null
wait
is "$(cat "$TEST_TMP/cut1.rc")" "1" "the cut harvest fails: $(tail -n 1 "$TEST_TMP/cut1.out")"
[ ! -e "$RESULTS/$BPKG/0/big.bin" ]
ok $? "no partial big.bin is in place"
# Cut 2: pbx itself is killed part-way.
pbx_bg harvest "$BPKG"
wait_bg 200 0.05 incoming_over "$BPKG" 50000000
kill9
[ ! -e "$RESULTS/$BPKG/0/big.bin" ] || [ "$(stat -c %s "$RESULTS/$BPKG/0/big.bin")" = 200000000 ]
ok $? "killing pbx leaves no partial file in place"
run_pbx harvest --json "$BPKG"
ok $rc "the next harvest resumes: $errout"
is "$(sha256sum <"$RESULTS/$BPKG/0/big.bin")" "$(sha256sum <"$SHARED/pbx/$BPKG/tasks/0/big.bin")" \
	"the 200 MB file is byte-identical (SHA-256)"
is "$(compare_tree "$BPKG")" "" "every file of the task is identical"
done_testing
