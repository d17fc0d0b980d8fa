#!/bin/sh
# t0230-partial-submit.sh - a submission that fails part-way (the second
# of two arrays is refused by sbatch) is recorded as partial; `pbx parrun`
# again submits only the rest, and every task runs exactly once.  Also:
# `pbx run` runs a single-point experiment and refuses a sweep.
. "$(dirname "$0")/lib.sh"

local_cluster ps slot "{ name: node, count: 2, gpus: 0, cpus: 4 }" "slurm: { max_array_size: 5 }"
CDIR="$PBX_HOME/clusters/ps"
SHARED="$CDIR/shared"

run_pbx -q cluster start ps
ok $rc "cluster starts: $errout"

# An sbatch that refuses its second call, put first on the head's PATH.
mkdir -p "$SHARED/fakebin"
cat >"$SHARED/fakebin/sbatch" <<'EOF'
#!/bin/sh
case " $* " in *" --test-only "*) exec /usr/bin/sbatch "$@" ;; esac   # parrun's validation
n=$(cat "$PBX_SHARED/fakebin/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$PBX_SHARED/fakebin/count"
if [ "$n" = 2 ]; then echo "sbatch: error: Batch job submission failed: injected" >&2; exit 1; fi
exec /usr/bin/sbatch "$@"
EOF
chmod +x "$SHARED/fakebin/sbatch"
ENVSH="$CDIR/nodes/head/etc/pbx/env.sh"
cp "$ENVSH" "$TEST_TMP/env.sh.orig"
echo 'PATH="$PBX_SHARED/fakebin:$PATH"; export PATH' >>"$ENVSH"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EOF'
name: partial
command: echo "task {i}"
sweep:
  grid:
    i: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
EOF
# Options the cluster refuses: nothing is recorded (no phantom experiment
# in `pbx ls`), the error says why, exit 2.
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" ps --partition=nope
is "$rc" "2" "parrun with a partition the cluster does not have is refused"
echo "$errout" | grep -q "experiment.yaml: ps refuses the experiment's resources (nothing was recorded or submitted): .*[Pp]artition"
ok $? "the error names the file and sbatch's reason: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM packages") $(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM tasks")" \
	"0 0" "no package and no task recorded"
run_pbx ls --json
is "$(echo "$out" | json_get 'len(d)')" "0" "pbx ls shows no phantom experiment"
is "$(cat "$SHARED/fakebin/count" 2>/dev/null || echo 0)" "0" "nothing reached sbatch"

run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" ps
is "$rc" "1" "a submission refused part-way fails"
echo "$errout" | grep -q "1 of 2 arrays were not submitted (run parrun again to submit the rest)"
ok $? "the error says what happened and what to do: $(echo "$errout" | head -n 1)"
PKG=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT short_id FROM packages WHERE name = 'partial'")
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM submissions")" "partial" "the store records the submission as partial"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(state) FROM (SELECT state FROM arrays ORDER BY id)")" \
	"submitted,failed" "one array submitted, one failed"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM tasks WHERE state = 'NEW'")" "5" \
	"the failed array's 5 tasks are not submitted"
# `pbx state` in between must leave never-submitted tasks NEW (it once
# freed their state and wrote heap garbage, and parrun then skipped them).
run_pbx state --json "$PKG"
ok $rc "pbx state after the partial submission: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM tasks WHERE state = 'NEW' AND submits = 0")" "5" \
	"pbx state leaves the 5 never-submitted tasks NEW"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM tasks WHERE state NOT IN ('NEW','PENDING','RUNNING','COMPLETED')")" "0" \
	"no task is in a state outside the known set"

cp "$TEST_TMP/env.sh.orig" "$ENVSH"
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" ps
ok $rc "parrun again: $errout"
is "$(echo "$out" | json_get 'd["submitted"], d["already_submitted"], d["pushed"]')" "5 5 False" \
	"it submits only the 5 missing tasks"
wait_final "$PKG" 60
is "$(json_get 'd["counts"]' <"$TEST_TMP/state.json")" "{'COMPLETED': 10}" "all 10 tasks complete"
runs=$(for i in 0 1 2 3 4 5 6 7 8 9; do grep -c '^task ' "$SHARED/pbx/$PKG/tasks/$i/stdout"; done | tr '\n' ' ')
is "$runs" "1 1 1 1 1 1 1 1 1 1 " "every task ran exactly once"

# A status file naming no known state (hand-edited, truncated) never
# reaches the store: the task keeps what it had.
printf '3 BOGUS$(x) 0 node1 1 1 2 77\n' >"$SHARED/pbx/$PKG/tasks/3/status"
run_pbx state --json "$PKG"
ok $rc "pbx state with a bogus status file: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM tasks WHERE idx = 3")" "COMPLETED" \
	"a status file's unknown state is not written"

# pbx run: one point.
mkdir -p "$TEST_TMP/one"
printf 'name: one\ncommand: echo single\n' >"$TEST_TMP/one/experiment.yaml"
run_pbx run --json "$TEST_TMP/one/experiment.yaml" ps
is "$rc:$(echo "$out" | json_get 'd["tasks"]')" "0:1" "pbx run submits a single-point experiment"
run_pbx run "$TEST_TMP/exp/experiment.yaml" ps
is "$rc" "2" "pbx run refuses a sweep of 10 points"
echo "$errout" | grep -q "'pbx run' runs one point, but the sweep has 10 (use 'pbx parrun')"
ok $? "and says to use parrun"
done_testing
