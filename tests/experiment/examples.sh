#!/bin/sh
# examples.sh - the shipped examples in templates/experiments/ load and
# package (sweep-demo: 24 tasks, fashion-mnist: 12, random-labels: 6, downpour: 2,
# sklearn-ridge: 20, with its environment's requirements.txt), and a sweep-demo task
# runs through the real wrapper: task 5 is lr 0.1, width 64, repeat 1 and
# writes metrics.jsonl ({"step","loss","acc"} lines) and result.txt.
# Usage: examples.sh EXP_PACK SOURCE_DIR
set -u
PACK=${1:?usage: examples.sh EXP_PACK SOURCE_DIR}
SRC=${2:?usage: examples.sh EXP_PACK SOURCE_DIR}
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"
command -v python3 >/dev/null 2>&1 || test_skip_all "python3 missing"
unset PBX_TASK_INDEX PBX_TASK_OFFSET SLURM_ARRAY_TASK_ID SLURM_ARRAY_JOB_ID SLURM_JOB_ID \
	SLURMD_NODENAME SLURM_RESTART_COUNT PBX_TEMPLATES 2>/dev/null || true
T=$(mktemp -d /tmp/pbx-exp-examples.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

for ex in sweep-demo:24 fashion-mnist:12 random-labels:6 downpour:2 sklearn-ridge:20; do
	name=${ex%:*}
	want=${ex#*:}
	test_expect_success "$name packages: $want tasks" '
		out=$("$PACK" "$SRC/templates/experiments/$name/experiment.yaml" "$T/$name.tar") ||
			fail "$name does not package"
		is "${out#* }" "$want" "$name: its tasks"
	'
done
test_expect_success 'sklearn-ridge carries its environment' '
	tar -tvf "$T/sklearn-ridge.tar" | grep -q " env/requirements.txt -> \.\./code/requirements.txt$" ||
		fail "sklearn-ridge: no env/requirements.txt link in its package"
	tar -tf "$T/sklearn-ridge.tar" | grep -qx "pbx-env.sh" || fail "sklearn-ridge: no pbx-env.sh in its package"
'

cat >"$T/metrics.py" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 50, len(rows)
for n, r in enumerate(rows, 1):
    assert set(r) == {"step", "loss", "acc"} and r["step"] == n, r
    assert 0 < r["loss"] < 2.5 and 0 <= r["acc"] <= 1, r
assert rows[-1]["loss"] < rows[0]["loss"]
PY
test_expect_success 'sweep-demo task 5 runs: metrics.jsonl and result.txt' '
	mkdir -p "$T/pkg" &&
	tar -xf "$T/sweep-demo.tar" -C "$T/pkg" &&
	{ env PBX_PKG_DIR="$T/pkg" PBX_RUN_DIR="$T/run" PBX_TASK_OFFSET=0 SLURM_ARRAY_TASK_ID=5 \
		sh "$T/pkg/pbx-task.sh" || fail "sweep-demo task 5 exited $?"; } &&
	D=$T/run/tasks/5 &&
	{ grep -q "^task 5: lr=0.1 width=64 repeat=1 " "$D/stdout" || fail "task 5 params: $(cat "$D/stdout")"; } &&
	{ [ -s "$D/result.txt" ] || fail "no result.txt"; } &&
	{ python3 "$T/metrics.py" "$D/metrics.jsonl" || fail "bad metrics.jsonl"; } &&
	{ grep -Eq "^5 COMPLETED 0 " "$D/status" || fail "status: $(cat "$D/status")"; }
'
test_done
